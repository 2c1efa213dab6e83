package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/names"
)

func TestBoundEntryRoundTrip(t *testing.T) {
	for _, in := range []Entry{
		{Node: "rgit-2", Written: at(time.Second), Epoch: 7, Session: 3},
		{Node: "rgit-2", Written: at(time.Second), Epoch: 7, Session: 3, Until: at(1500 * time.Millisecond)},
	} {
		b, err := in.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != boundVersion {
			t.Fatalf("bound entry encoded with version %d", b[0])
		}
		var out Entry
		if err := out.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if out != in {
			t.Fatalf("round trip: %+v != %+v", out, in)
		}
	}
	// Expires of a bound entry is its session's: never stored.
	withExp := Entry{Node: "rgit-2", Written: t0, Epoch: 1, Session: 1, Expires: at(time.Hour)}
	b, _ := withExp.MarshalBinary()
	var out Entry
	if err := out.UnmarshalBinary(b); err != nil || !out.Expires.IsZero() {
		t.Fatalf("bound entry kept Expires: %+v %v", out, err)
	}
}

func TestSessionRoundTripAndStrict(t *testing.T) {
	in := NodeSession{ID: 9, Expires: at(10 * time.Second), Renewed: t0, Started: at(-time.Minute)}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out NodeSession
	if err := out.UnmarshalBinary(b); err != nil || out != in {
		t.Fatalf("round trip: %+v != %+v (%v)", out, in, err)
	}
	if _, err := (NodeSession{}).MarshalBinary(); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("session 0 encoded: %v", err)
	}
	for name, bad := range map[string][]byte{
		"empty": nil, "truncated": b[:len(b)-1],
		"trailing": append(append([]byte{}, b...), 0), "id 0": {1, 0, 0, 0, 0},
	} {
		var s NodeSession
		if err := s.UnmarshalBinary(bad); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%s: err = %v, want ErrCorruptEntry", name, err)
		}
	}
	var s NodeSession
	if err := s.UnmarshalBinary(append([]byte{2}, b[1:]...)); !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), "ownership session version 2 ") {
		t.Errorf("version 2: err = %v, want a refusal naming it", err)
	}
	if n, err := NodeOfSessionKey(SessionPrefix + "rgit-3"); err != nil || n != "rgit-3" {
		t.Fatalf("NodeOfSessionKey = %q, %v", n, err)
	}
	if _, err := SessionKey("bad/node"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("SessionKey of a bad node: %v", err)
	}
}

func TestBind(t *testing.T) {
	s := NodeSession{ID: 2, Expires: at(13 * time.Second), Renewed: at(3 * time.Second), Started: at(time.Second)}
	bound := Entry{Node: "rgit-1", Written: at(2 * time.Second), Epoch: 4, Session: 2}
	for _, tc := range []struct {
		name    string
		e       Entry
		ok      bool
		expires time.Time
	}{
		{"per-repository lease keeps its own expiry", Entry{Node: "rgit-1", Expires: at(5 * time.Second), Epoch: 1}, true, at(5 * time.Second)},
		{"current session", bound, true, s.Expires},
		{"drain cap sooner", func() Entry { e := bound; e.Until = at(4 * time.Second); return e }(), true, at(4 * time.Second)},
		{"drain cap later than the session", func() Entry { e := bound; e.Until = at(20 * time.Second); return e }(), true, s.Expires},
		{"replaced session lapsed when the new one started", func() Entry { e := bound; e.Session = 1; return e }(), true, s.Started},
		{"no session record", bound, false, bound.Written},
	} {
		got := Bind(tc.e, s, tc.ok)
		if !got.Expires.Equal(tc.expires) {
			t.Errorf("%s: expires %s, want %s", tc.name, got.Expires.Sub(t0), tc.expires.Sub(t0))
		}
		if !got.Written.Equal(tc.e.Written) {
			t.Errorf("%s: written changed to %s", tc.name, got.Written.Sub(t0))
		}
	}
}

func TestLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Entry
		ok   bool
		want bool
	}{
		{"no entry in the view yet", Entry{}, false, false},
		{"own grant", Entry{Node: "rgit-1", Epoch: 3, Session: 5}, true, false},
		{"view older than the grant", Entry{Node: "rgit-2", Epoch: 2, Session: 1}, true, false},
		{"granted to another node since", Entry{Node: "rgit-2", Epoch: 4, Session: 1}, true, true},
		{"granted to another session of this node since", Entry{Node: "rgit-1", Epoch: 4, Session: 6}, true, true},
		{"granted to this session again (regrant in flight)", Entry{Node: "rgit-1", Epoch: 4, Session: 5}, true, false},
	} {
		if got := Lost(tc.e, tc.ok, "rgit-1", 5, 3); got != tc.want {
			t.Errorf("%s: Lost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSessionGrantsAndRenewals(t *testing.T) {
	m := NewMap(DefaultTimings())
	if _, ok := m.RenewSession("rgit-1", 1, t0); ok {
		t.Fatal("renewed a session never opened")
	}
	s, err := m.OpenSession("rgit-1", t0)
	if err != nil || s.ID != 1 {
		t.Fatalf("OpenSession = %+v, %v", s, err)
	}
	d, _ := m.Claim(rn("a/b"), "rgit-1", t0, nil, Options{})
	if d.Entry.Session != 1 || !d.Entry.Expires.Equal(at(TTL)) {
		t.Fatalf("claim not bound to the session: %+v", d.Entry)
	}
	// A steered grant is a per-repository lease until its node renews it.
	live := LiveSet{{Node: "rgit-1", Weight: 1}, {Node: "rgit-2", Weight: 1}}
	var steered Decision
	for i := 0; ; i++ {
		repo := rn("s/r" + string(rune('a'+i)))
		if Rendezvous(repo, live) == "rgit-1" {
			steered, _ = m.Claim(repo, "rgit-2", t0, live, Options{Steer: true})
			break
		}
	}
	if !steered.Steered || steered.Entry.Session != 0 {
		t.Fatalf("steered grant bound to a session: %+v", steered)
	}
	if renewed, _ := m.Renew("rgit-1", []names.Repo{steered.Repo}, at(time.Second)); len(renewed) != 1 {
		t.Fatal("the steered grant's node could not renew it")
	}
	if e, _ := m.Get(steered.Repo); e.Session != 1 {
		t.Fatalf("renewed steered grant not bound: %+v", e)
	}
	// A renewal moves the session, so every bound entry, without a write
	// per entry.
	if _, ok := m.RenewSession("rgit-1", 1, at(9*time.Second)); !ok {
		t.Fatal("current session declined")
	}
	if e, _ := m.Get(rn("a/b")); !e.Expires.Equal(at(9*time.Second + TTL)) {
		t.Fatalf("entry not renewed with its session: expires %s", e.Expires.Sub(t0))
	}
	// A restart: the new session ends the old one's entries at once.
	if s, _ := m.OpenSession("rgit-1", at(10*time.Second)); s.ID != 2 {
		t.Fatalf("reopened session ID %d", s.ID)
	}
	if e, _ := m.Get(rn("a/b")); e.Live(at(10 * time.Second)) {
		t.Fatal("entry of the replaced session still live")
	}
	if _, ok := m.RenewSession("rgit-1", 1, at(10*time.Second)); ok {
		t.Fatal("stale session renewed")
	}
	d, _ = m.Claim(rn("a/b"), "rgit-2", at(10*time.Second), nil, Options{})
	if d.Outcome != Granted || d.Entry.Epoch != 2 {
		t.Fatalf("claim after the restart = %+v", d)
	}
}

func TestRenewLapsedSessionDeclined(t *testing.T) {
	m := NewMap(DefaultTimings())
	if _, err := m.OpenSession("rgit-1", t0); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.RenewSession("rgit-1", 1, at(TTL-time.Nanosecond)); !ok {
		t.Fatal("live session declined")
	}
	// Lapsed (a TTL after the last renewal): its entries may be anyone's
	// by now, so a renewal, however late it was sent, is declined.
	if _, ok := m.RenewSession("rgit-1", 1, at(2*TTL-time.Nanosecond)); ok {
		t.Fatal("lapsed session renewed")
	}
	h, err := m.Heartbeat(RenewLeases{Node: "rgit-1", Session: 1, Repos: []names.Repo{rn("a/b")}}, at(2*TTL))
	if err != nil || !h.Reply.SessionDeclined || h.WriteSession || len(h.Reply.Declined) != 1 {
		t.Fatalf("heartbeat of a lapsed session = %+v, %v", h, err)
	}
}

func TestServeLease(t *testing.T) {
	ttl := TTL
	l := ServeLease{Session: 4, Sent: t0}
	end := at(ttl - ServeMargin(ttl))
	for _, tc := range []struct {
		name    string
		session uint64
		now     time.Time
		want    bool
	}{
		{"within the lease", 4, at(time.Second), true},
		{"just before its end", 4, end.Add(-time.Nanosecond), true},
		{"at its end", 4, end, false},
		{"another session's grant", 3, at(time.Second), false},
		{"a per-repository lease", 0, at(time.Second), false},
	} {
		if got := l.Serves(tc.session, tc.now, ttl); got != tc.want {
			t.Errorf("%s: Serves = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The lease ends before the session can lapse at the leader, which
	// renewed it no earlier than the node sent the renewal, even with the
	// node's clock a ServeMargin slower.
	if slow := t0.Add(time.Duration(float64(ttl-ServeMargin(ttl)) * 1.1)); slow.After(at(ttl)) {
		t.Fatalf("lease measured by a clock 10%% slow ends at %s, after the leader's lapse at %s", slow.Sub(t0), ttl)
	}
	for _, tc := range []struct {
		name    string
		session uint64
		sent    time.Time
		want    ServeLease
	}{
		{"later renewal", 4, at(3 * time.Second), ServeLease{Session: 4, Sent: at(3 * time.Second)}},
		{"earlier renewal answered late", 4, at(-time.Second), l},
		{"older session's answer", 3, at(3 * time.Second), l},
		{"new session", 5, at(time.Second), ServeLease{Session: 5, Sent: at(time.Second)}},
	} {
		if got := l.Acked(tc.session, tc.sent); got != tc.want {
			t.Errorf("%s: Acked = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
