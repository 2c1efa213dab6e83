// Package hookrecv is a webhook receiver on loopback for tests and
// benchmarks: it verifies each delivery's X-Hub-Signature-256 with its own
// HMAC code (as a receiver of GitHub's webhooks does, so it checks
// rgit's compatibility rather than reusing rgit's signing), records what
// arrived, and can be told to fail, hang or drop connections for a while.
//
// It is testkit: only tests and cmd/rgit-bench use it; it reports errors
// rather than taking a testing.TB so the benchmark can use it too. It
// imports only the standard library (transport/hooks tests use it).
package hookrecv

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Mode is how the receiver answers.
type Mode int

const (
	OK   Mode = iota // 204
	Fail             // 503
	Hang             // never answers (until the sender gives up or Close)
	Drop             // closes the connection without answering
)

// Delivery is one request that arrived.
type Delivery struct {
	Event, ID, Hook string
	// SignatureOK: X-Hub-Signature-256 is the body's HMAC-SHA256 under
	// the secret.
	SignatureOK bool
	Raw         []byte // the body
	At          time.Time
	// Answered is the mode the receiver answered in; only OK deliveries
	// count as received by a sender.
	Answered Mode
}

// Receiver is a webhook endpoint on 127.0.0.1.
type Receiver struct {
	URL    string
	secret string
	srv    *http.Server
	ln     net.Listener
	stop   chan struct{}

	mu      sync.Mutex
	mode    Mode
	got     []Delivery
	changed chan struct{} // closed and replaced on every arrival
	delay   time.Duration
}

// Start listens on a free loopback port; secret verifies signatures.
func Start(secret string) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/hook", secret: secret, ln: ln,
		stop: make(chan struct{}), changed: make(chan struct{})}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln) //nolint:errcheck // ends with Close
	return r, nil
}

// Close stops the receiver; hanging requests end.
func (r *Receiver) Close() {
	close(r.stop)
	r.srv.Close()
}

// SetMode changes how the receiver answers from now on.
func (r *Receiver) SetMode(m Mode) {
	r.mu.Lock()
	r.mode = m
	r.mu.Unlock()
}

// SetDelay makes every answer wait d (a slow receiver).
func (r *Receiver) SetDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

// ServeHTTP records the delivery and answers by the mode.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
	if err != nil {
		return
	}
	d := Delivery{Event: req.Header.Get("X-Rgit-Event"), ID: req.Header.Get("X-Rgit-Delivery"),
		Hook: req.Header.Get("X-Rgit-Hook-ID"), Raw: raw, At: time.Now()}
	m := hmac.New(sha256.New, []byte(r.secret))
	m.Write(raw)
	d.SignatureOK = hmac.Equal([]byte(req.Header.Get("X-Hub-Signature-256")), []byte("sha256="+hex.EncodeToString(m.Sum(nil))))
	r.mu.Lock()
	d.Answered = r.mode
	delay := r.delay
	r.got = append(r.got, d)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	switch d.Answered {
	case OK:
		w.WriteHeader(http.StatusNoContent)
	case Fail:
		http.Error(w, "receiver down for maintenance", http.StatusServiceUnavailable)
	case Hang:
		select {
		case <-req.Context().Done():
		case <-r.stop:
		}
	case Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
	}
}

// Decode decodes the body into v (hooks.Payload).
func (d Delivery) Decode(v any) error { return json.Unmarshal(d.Raw, v) }

// All returns every request that arrived, in order.
func (r *Receiver) All() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Received returns the deliveries answered OK, in order of arrival.
func (r *Receiver) Received() []Delivery {
	var out []Delivery
	for _, d := range r.All() {
		if d.Answered == OK {
			out = append(out, d)
		}
	}
	return out
}

// Wait returns All once cond holds for it, re-checking on every arrival,
// or an error when ctx ends first.
func (r *Receiver) Wait(ctx context.Context, cond func([]Delivery) bool) ([]Delivery, error) {
	for {
		r.mu.Lock()
		all, changed := append([]Delivery(nil), r.got...), r.changed
		r.mu.Unlock()
		if cond(all) {
			return all, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return all, fmt.Errorf("webhook receiver: %w (%d requests arrived)", ctx.Err(), len(all))
		}
	}
}
