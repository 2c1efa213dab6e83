package httpgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe), so
// an HTTP server and its client run inside a synctest bubble, in fake
// time: deadlines expire when the fake clock says so, not when the
// scheduler happens to run the test.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial hands the server one end of a new pipe and returns the other.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestPaceMovingBody: under Pace, a request body that keeps moving at the
// rate is read to the end although it takes many times the grace, and one
// that pauses for longer than the grace is cut off. It runs in fake time,
// so a busy machine cannot stretch a pause past the grace: both cases are
// exact.
func TestPaceMovingBody(t *testing.T) {
	const (
		stall         = 300 * time.Millisecond
		chunk, chunks = 32 << 10, 40
	)
	for _, tc := range []struct {
		name   string
		gap    time.Duration // between body pieces
		wantOK bool
	}{
		{"slow but moving body", stall / 6, true},
		{"moving just inside the grace", stall - time.Millisecond, true},
		{"a pause longer than the grace", stall + time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newPipeListener()
				srv := &http.Server{Handler: Pace(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n, err := io.Copy(io.Discard, r.Body)
					if err != nil {
						http.Error(w, err.Error(), http.StatusRequestTimeout)
						return
					}
					fmt.Fprintf(w, "read %d", n)
				}), clientlimit.Rate{Grace: stall, BytesPerSec: 64 << 10})}
				served := make(chan error, 1)
				go func() { served <- srv.Serve(l) }()
				tr := &http.Transport{DialContext: l.dial}
				defer func() {
					tr.CloseIdleConnections()
					srv.Close()
					if err := <-served; !errors.Is(err, http.ErrServerClosed) {
						t.Errorf("Serve: %v", err)
					}
				}()

				pr, pw := io.Pipe()
				sent := make(chan struct{})
				defer func() { <-sent }() // the sender ends once pr is closed
				go func() {
					defer close(sent)
					buf := bytes.Repeat([]byte("x"), chunk)
					for range chunks {
						time.Sleep(tc.gap)
						if _, err := pw.Write(buf); err != nil {
							return
						}
					}
					pw.Close()
				}()
				start := time.Now()
				req, _ := http.NewRequest("POST", "http://pipe/alice/pub.git/git-upload-pack", pr)
				resp, err := (&http.Client{Transport: tr}).Do(req)
				var status int
				var body []byte
				if err == nil {
					status = resp.StatusCode
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				pr.Close()
				took := time.Since(start)
				if !tc.wantOK {
					if err == nil && status == http.StatusOK {
						t.Fatalf("a body pausing %s under a %s grace was read to the end: %q", tc.gap, stall, body)
					}
					if took > stall+2*tc.gap {
						t.Errorf("cut off after %s, want about %s after the first pause began", took, stall)
					}
					return
				}
				if err != nil || status != http.StatusOK || string(body) != fmt.Sprintf("read %d", chunk*chunks) {
					t.Fatalf("status %d body %q err %v", status, body, err)
				}
				if want := chunks * tc.gap; took < want {
					t.Fatalf("body took %s, want at least %s", took, want)
				}
			})
		})
	}
}
