package hooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/testkit/hookrecv"
)

// TestGuard: deliveries reach public addresses only, unless the range is
// allowed; IPv4-mapped IPv6 and NAT64 forms of private addresses are
// refused like the addresses themselves.
func TestGuard(t *testing.T) {
	g := Guard{}
	allowed := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.2.3/32")}}
	for _, c := range []struct {
		addr      string
		ok, allow bool // without and with the allow list
	}{
		{"8.8.8.8", true, true},
		{"2606:4700:4700::1111", true, true},
		{"127.0.0.1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"::1", false, false},
		{"10.1.2.3", false, true},
		{"10.1.2.4", false, false},
		{"192.168.1.1", false, false},
		{"172.20.0.1", false, false},
		{"169.254.169.254", false, false},
		{"100.100.100.100", false, false},
		{"0.0.0.0", false, false},
		{"224.0.0.1", false, false},
		{"255.255.255.255", false, false},
		{"fd00:ec2::254", false, false},
		{"fe80::1", false, false},
		{"64:ff9b::a00:1", false, false},
		{"::ffff:10.0.0.1", false, false},
	} {
		a := netip.MustParseAddr(c.addr)
		if err := g.Check(a); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBlockedAddress)) {
			t.Errorf("Check(%s) = %v, want ok=%v", c.addr, err, c.ok)
		}
		if err := allowed.Check(a); (err == nil) != c.allow {
			t.Errorf("allowed.Check(%s) = %v, want ok=%v", c.addr, err, c.allow)
		}
	}
}

func hook(url string) outbox.Hook {
	return outbox.Hook{ID: "a000000000000000", URL: url, Secret: "it's a secret", Events: []string{outbox.KindPush}}
}

// TestSendRefusesLoopbackByName: a name that resolves to loopback is
// refused at connect time, on the address it resolved to: the check
// cannot be passed by one resolution and connected by another.
func TestSendRefusesLoopbackByName(t *testing.T) {
	rcv, err := hookrecv.Start("it's a secret")
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	url := strings.Replace(rcv.URL, "127.0.0.1", "localhost", 1)
	a := send(context.Background(), newClient(Guard{}, 2*time.Second), hook(url), "push", "d1", []byte(`{}`))
	if a.OK() || !strings.Contains(a.Error, "not allowed") {
		t.Fatalf("attempt to localhost: %+v", a)
	}
	if n := len(rcv.All()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
	// Allowed, the same request arrives, signed.
	a = send(context.Background(), newClient(Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}},
		2*time.Second), hook(url), "push", "d1", []byte(`{"event":"push"}`))
	if !a.OK() || a.Status != http.StatusNoContent {
		t.Fatalf("allowed attempt: %+v", a)
	}
	got := rcv.All()
	if len(got) != 1 || !got[0].SignatureOK || got[0].ID != "d1" || got[0].Event != "push" || got[0].Hook != "a000000000000000" {
		t.Fatalf("received %+v", got)
	}
}

var loopback = Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// TestSendBounds: a redirect is not followed (a failed attempt naming
// it), a receiver that hangs is cut off at the timeout, and a huge answer
// is read only to its bound.
func TestSendBounds(t *testing.T) {
	followed := false
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed = true })
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 1<<16))
		for i := 0; i < 1<<14 && r.Context().Err() == nil; i++ { // up to 1 GiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(loopback, 500*time.Millisecond)
	ctx := context.Background()

	a := send(ctx, c, hook(srv.URL+"/redirect"), "push", "d", nil)
	if a.OK() || a.Status != http.StatusFound || !strings.Contains(a.Error, "redirects are not followed") || followed {
		t.Errorf("redirect: %+v (followed %v)", a, followed)
	}
	start := time.Now()
	a = send(ctx, c, hook(srv.URL+"/hang"), "push", "d", nil)
	if a.OK() || !strings.HasPrefix(a.Error, "timeout") || time.Since(start) > 5*time.Second {
		t.Errorf("hang: %+v after %v", a, time.Since(start))
	}
	a = send(ctx, c, hook(srv.URL+"/huge"), "push", "d", nil)
	if !a.OK() {
		t.Errorf("huge answer: %+v", a)
	}
}

func TestSignatureIsGitHubs(t *testing.T) {
	// The example of GitHub's documentation ("Validating webhook
	// deliveries"): secret "It's a Secret to Everybody", body "Hello, World!".
	got := Signature("It's a Secret to Everybody", []byte("Hello, World!"))
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got != want {
		t.Errorf("Signature = %s, want %s", got, want)
	}
}

func TestNewHook(t *testing.T) {
	h, gen, err := NewHook("https://ci.example.com/hook?x=1", "", "push,tag", "alice", time.Now())
	if err != nil || !gen || len(h.Secret) != 64 || len(h.Events) != 2 || !outbox.ValidHookID(h.ID) {
		t.Fatalf("NewHook: %+v %v %v", h, gen, err)
	}
	if h, gen, err = NewHook("http://x/", "mine", "", "", time.Now()); err != nil || gen || h.Secret != "mine" {
		t.Fatalf("given secret: %+v %v %v", h, gen, err)
	}
	for _, u := range []string{"ftp://x/", "http:///nohost", "http://user:pw@x/", "x/y", "http://x/#frag", "https://" + strings.Repeat("a", MaxURL)} {
		if _, _, err := NewHook(u, "", "", "", time.Now()); !errors.Is(err, ErrBadURL) {
			t.Errorf("NewHook(%q): %v", u, err)
		}
	}
	if _, _, err := NewHook("http://x/", "", "pushes", "", time.Now()); !errors.Is(err, outbox.ErrBadEvents) {
		t.Errorf("bad events: %v", err)
	}
}
