package gitproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// trickle is a client stream that sends head at once and then blocks
// until it is closed: a client that started a request and went slow.
type trickle struct {
	head    *strings.Reader
	blocked chan struct{} // closed when the server waits past head
	closed  chan struct{}
}

func newTrickle(head string) *trickle {
	return &trickle{head: strings.NewReader(head), blocked: make(chan struct{}), closed: make(chan struct{})}
}

func (t *trickle) Read(p []byte) (int, error) {
	if t.head.Len() > 0 {
		return t.head.Read(p)
	}
	select {
	case <-t.blocked:
	default:
		close(t.blocked)
	}
	<-t.closed
	return 0, io.EOF
}

// TestSlowRequestHoldsNoSlot: with one negotiation slot, a client that
// sent part of a fetch request and then waits holds no slot: another
// fetch is served meanwhile, in both protocol versions and whether the
// slow client is in its want list or, full duplex, between rounds of
// haves. (A slot was taken before the request was read, so the second
// fetch waited for the first client for as long as it liked.)
func TestSlowRequestHoldsNoSlot(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main, old := rev(t, src, "main"), rev(t, src, "main~3")
	slots := NewSlots(1, -1)
	cases := []struct {
		name string
		opt  Options
		head string // what the slow client sends before it waits
	}{
		{"v2 arguments", Options{Protocol: 2, StatelessRPC: true}, pkt("command=fetch\n", "0001", "want "+main+"\n")},
		{"v0 want list", Options{StatelessRPC: true}, pkt("want " + main + " multi_ack_detailed\n")},
		{"v0 between rounds", Options{}, pkt("want "+main+" multi_ack_detailed\n", "0000", "have "+old+"\n", "0000") + "0032have "},
	}
	honest := pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+old+"\n", "0000")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Limits = Limits{Negotiations: slots}
			slow := newTrickle(tc.head)
			slowDone := make(chan error, 1)
			go func() {
				slowDone <- UploadPack(context.Background(), &gitRepo{dir: src}, slow, io.Discard, tc.opt)
			}()
			select {
			case <-slow.blocked:
			case err := <-slowDone:
				t.Fatalf("slow client's session ended: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a broken server
			defer cancel()
			var out bytes.Buffer
			err := UploadPack(ctx, &gitRepo{dir: src}, strings.NewReader(honest), &out,
				Options{Protocol: 2, StatelessRPC: true, Limits: Limits{Negotiations: slots}})
			close(slow.closed)
			if err != nil {
				t.Fatalf("honest fetch while a slow client waits: %v", err)
			}
			if !strings.Contains(out.String(), "ACK "+old) {
				t.Errorf("honest fetch answered %q", out.String())
			}
			<-slowDone
		})
	}
}

// TestSlotQueueBound: a request that finds every slot taken waits at most
// the queue bound, after reading all of it, and is then refused as busy
// naming the settings: a stateless one with nothing written (the front
// end answers 503), a full-duplex one with the ERR line git prints.
func TestSlotQueueBound(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main := rev(t, src, "main")
	req := pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+main+"\n", "0000")
	const want = "server busy: all 1 fetch negotiation slots stayed taken for 5s (set RGIT_MAX_NEGOTIATIONS, RGIT_NEGOTIATION_WAIT_SECS)"
	for _, stateless := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			slots := NewSlots(1, 5*time.Second)
			release, err := Limits{Negotiations: slots}.acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			in := strings.NewReader(req)
			var out bytes.Buffer
			start := time.Now()
			// The backend is never reached: no slot, no lookup.
			err = UploadPack(context.Background(), nil, in, &out,
				Options{Protocol: 2, StatelessRPC: stateless, Limits: Limits{Negotiations: slots}})
			if waited := time.Since(start); waited != 5*time.Second {
				t.Errorf("waited %s for a slot, want the 5s bound", waited)
			}
			if be, ok := errors.AsType[*BusyError](err); !ok || !errors.Is(err, ErrBusy) || be.Error() != want {
				t.Fatalf("error %v, want the busy error %q", err, want)
			}
			if in.Len() != 0 {
				t.Errorf("%d request bytes unread: the request is read before the wait", in.Len())
			}
			got := out.String()
			if stateless {
				if got != "" {
					t.Errorf("stateless refusal wrote %q", got)
				}
				return
			}
			if !strings.HasSuffix(got, pkt("ERR "+want+"\n")) {
				t.Errorf("full-duplex refusal wrote %q", got)
			}
		})
	}
}

// TestRequestDeadline: a whole request must arrive within
// Limits.RequestTimeout of the server starting to wait for it, however
// steadily its bytes come: a client sending one byte every 10 s is cut
// off at the deadline with the ERR line naming RGIT_REQUEST_SECS, in the
// v2 argument section, the v0 want list and a v0 round of haves. An
// honest request that takes most of the deadline is served.
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main, old := rev(t, src, "main"), rev(t, src, "main~3")
	const timeout = time.Minute
	cases := []struct {
		name      string
		opt       Options
		head      string // sent at once
		trickled  string // then a byte every 10 s
		completes bool
	}{
		{"v2 arguments", Options{Protocol: 2, StatelessRPC: true}, pkt("command=fetch\n", "0001"), pkt("want "+main+"\n", "0000"), false},
		{"v0 want list", Options{StatelessRPC: true}, "", pkt("want " + main + "\n"), false},
		{"v0 haves", Options{StatelessRPC: true}, pkt("want "+main+" multi_ack_detailed\n", "0000"), pkt("have "+old+"\n", "0000"), false},
		{"v2 honest", Options{Protocol: 2, StatelessRPC: true}, pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+old+"\n"), "0000", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				server, client := net.Pipe()
				stop := make(chan struct{})
				clientDone := make(chan struct{})
				defer func() { close(stop); server.Close(); <-clientDone }()
				go func() {
					defer close(clientDone)
					defer client.Close()
					io.WriteString(client, tc.head)
					for i := range len(tc.trickled) {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Second):
						}
						if _, err := client.Write([]byte{tc.trickled[i]}); err != nil {
							return
						}
					}
					io.Copy(io.Discard, client)
				}()
				opt := tc.opt
				opt.Input = server
				opt.Limits = Limits{RequestTimeout: timeout}
				var out bytes.Buffer
				start := time.Now()
				err := UploadPack(context.Background(), &gitRepo{dir: src}, server, &out, opt)
				if tc.completes {
					if err != nil {
						t.Fatalf("honest request: %v", err)
					}
					return
				}
				if d := time.Since(start); d != timeout {
					t.Errorf("cut off after %s, want %s", d, timeout)
				}
				le, ok := errors.AsType[*LimitError](err)
				if !ok || le.Setting != SettingRequestTimeout {
					t.Fatalf("error %v, want the request deadline", err)
				}
				want := pkt("ERR request not complete in time (limit 60 seconds, set RGIT_REQUEST_SECS)\n")
				if !strings.HasSuffix(out.String(), want) {
					t.Errorf("response %q does not end in %q", out.String(), want)
				}
			})
		})
	}
}

// TestBusyAsGitPrintsIt: a fetch that finds no negotiation slot within
// the queue bound fails with the busy line, and git prints it as the
// remote's error in every protocol version over a full-duplex connection
// (ssh, git://), where it arrives after the ref advertisement.
func TestBusyAsGitPrintsIt(t *testing.T) {
	t.Parallel()
	const want = "remote error: server busy: all 1 fetch negotiation slots stayed taken for 100ms (set RGIT_MAX_NEGOTIATIONS, RGIT_NEGOTIATION_WAIT_SECS)"
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "dst.git")
			runGit(t, "", "init", "-q", "--bare", dst)
			out, err := tryGit(t, "", []string{"RGIT_HELPER_BUSY=1"}, "--git-dir", dst,
				"-c", "protocol.version="+strconv.Itoa(proto), "fetch", "--upload-pack", helperCmd(t, "upload"),
				src, "+refs/heads/main:refs/heads/main")
			if err == nil || !strings.Contains(out, want) {
				t.Fatalf("fetch with every slot taken: %v\n%s\nwant %q", err, out, want)
			}
		})
	}
}

// TestAdmitPack: a fetch's pack work is admitted (Options.AdmitPack) only
// once its negotiation decided that the pack follows, and released after
// the pack; an advertisement, ls-refs and a round that ends without a pack
// ask nothing. Refused, the answer is the busy line full duplex and
// nothing stateless (the front end's 503).
func TestAdmitPack(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main, old := rev(t, src, "main"), rev(t, src, "main~3")
	v2 := Options{Protocol: 2, StatelessRPC: true}
	cases := []struct {
		name  string
		opt   Options
		in    string
		packs int
	}{
		{"advertisement", Options{Protocol: 2, StatelessRPC: true, AdvertiseOnly: true}, "", 0},
		{"ls-refs", v2, pkt("command=ls-refs\n", "0000"), 0},
		{"v2 round without ready", v2, pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+strings.Repeat("1", 40)+"\n", "0000"), 0},
		{"v2 done", v2, pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+old+"\n", "done\n", "0000"), 1},
		{"v0 flush", Options{StatelessRPC: true}, pkt("want "+main+" multi_ack_detailed\n", "0000", "have "+strings.Repeat("1", 40)+"\n", "0000"), 0},
		{"v0 done", Options{StatelessRPC: true}, pkt("want "+main+"\n", "0000", "have "+old+"\n", "done\n"), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asked, released int
			tc.opt.AdmitPack = func() (func(), error) {
				asked++
				return func() { released++ }, nil
			}
			var out bytes.Buffer
			if err := UploadPack(context.Background(), &gitRepo{dir: src}, strings.NewReader(tc.in), &out, tc.opt); err != nil {
				t.Fatal(err)
			}
			if asked != tc.packs || released != tc.packs {
				t.Errorf("admission asked %d, released %d times, want %d", asked, released, tc.packs)
			}
		})
	}
	refuse := func() (func(), error) { return nil, fmt.Errorf("%w: no memory", ErrBusy) }
	var out bytes.Buffer
	opt := Options{Protocol: 2, StatelessRPC: true, AdmitPack: refuse}
	err := UploadPack(context.Background(), &gitRepo{dir: src}, strings.NewReader(cases[3].in), &out, opt)
	if !errors.Is(err, ErrBusy) || out.Len() != 0 {
		t.Errorf("stateless refusal: %v, wrote %q", err, out.String())
	}
	out.Reset()
	opt = Options{AdmitPack: refuse}
	err = UploadPack(context.Background(), &gitRepo{dir: src}, strings.NewReader(cases[5].in), &out, opt)
	if !errors.Is(err, ErrBusy) || !strings.HasSuffix(out.String(), pkt("ERR server busy\n")) || strings.Contains(out.String(), "ACK") {
		t.Errorf("full-duplex refusal: %v, wrote %q", err, out.String())
	}
}
