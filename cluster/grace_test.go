package cluster

import (
	"errors"
	"testing"
	"time"
)

func TestRenewUnpersisted(t *testing.T) {
	const grace = 60 * time.Second
	h := HorizonAt(t0, grace) // the last landed commit was composed at t0
	for _, tc := range []struct {
		name    string
		s       *NodeSession // rgit-1's session on the map; nil: none
		id      uint64
		decided time.Duration
		h       Horizon
		ok      bool
		expires time.Duration
	}{
		{"live, within the horizon", &NodeSession{ID: 2, Expires: at(5 * time.Second)}, 2, 3 * time.Second, h, true, 13 * time.Second},
		{"live, just before the horizon", &NodeSession{ID: 2, Expires: at(65 * time.Second)}, 2, grace - time.Millisecond, h, true, grace - time.Millisecond + TTL},
		{"live, at the horizon", &NodeSession{ID: 2, Expires: at(65 * time.Second)}, 2, grace, h, false, 0},
		{"before the commit composed", &NodeSession{ID: 2, Expires: at(5 * time.Second)}, 2, -time.Millisecond, h, false, 0},
		{"no commit landed yet", &NodeSession{ID: 2, Expires: at(5 * time.Second)}, 2, time.Second, Horizon{}, false, 0},
		{"no grace", &NodeSession{ID: 2, Expires: at(5 * time.Second)}, 2, time.Second, HorizonAt(t0, 0), false, 0},
		{"lapsed", &NodeSession{ID: 2, Expires: at(5 * time.Second)}, 2, 5 * time.Second, h, false, 0},
		{"replaced", &NodeSession{ID: 3, Expires: at(5 * time.Second)}, 2, time.Second, h, false, 0},
		{"no session", nil, 2, time.Second, h, false, 0},
		{"never shortened", &NodeSession{ID: 2, Expires: at(30 * time.Second)}, 2, time.Second, h, true, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMap(DefaultTimings())
			if tc.s != nil {
				if err := m.PutSession("rgit-1", *tc.s); err != nil {
					t.Fatal(err)
				}
			}
			s, ok := m.RenewUnpersisted("rgit-1", tc.id, at(tc.decided), tc.h)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && !s.Expires.Equal(at(tc.expires)) {
				t.Fatalf("expires %s, want %s", s.Expires.Sub(t0), tc.expires)
			}
			if got, _ := m.Session("rgit-1"); ok && got != s {
				t.Fatalf("map holds %+v, want %+v", got, s)
			}
		})
	}
}

func TestHorizonFloor(t *testing.T) {
	h := Horizon{Since: t0, Until: at(60 * time.Second)}
	for _, tc := range []struct {
		name    string
		expires time.Duration
		h       Horizon
		want    time.Duration
	}{
		{"live at the last commit", 4 * time.Second, h, 70 * time.Second},
		{"already later", 90 * time.Second, h, 90 * time.Second},
		{"lapsed at the last commit", 0, h, 0},
		{"lapsed before", -time.Minute, h, -time.Minute},
		{"a drain (until = since)", 4 * time.Second, Horizon{Since: t0, Until: t0}, 4 * time.Second},
		{"no grace", 4 * time.Second, HorizonAt(t0, 0), 4 * time.Second},
		{"no horizon stored", 4 * time.Second, Horizon{}, 4 * time.Second},
	} {
		s := NodeSession{ID: 4, Expires: at(tc.expires), Renewed: at(-time.Second), Started: at(-time.Hour)}
		got := tc.h.Floor(s, TTL)
		want := s
		want.Expires = at(tc.want)
		if got != want {
			t.Errorf("%s: Floor = %+v, want %+v", tc.name, got, want)
		}
	}
}

func TestHorizonRoundTripAndStrict(t *testing.T) {
	in := Horizon{Since: at(time.Second), Until: at(61 * time.Second)}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Horizon
	if err := out.UnmarshalBinary(b); err != nil || out != in {
		t.Fatalf("round trip: %+v != %+v (%v)", out, in, err)
	}
	for _, bad := range []string{"", "1", "1 x", "x 1", "1  2"} {
		if err := out.UnmarshalBinary([]byte(bad)); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%q decoded: %v", bad, err)
		}
	}
}

// TestUnpersisted: renewals acknowledged from memory survive a reload of
// the map (a failed write) and leave once a commit persisted them.
func TestUnpersisted(t *testing.T) {
	stored := NodeSession{ID: 2, Expires: at(10 * time.Second), Renewed: t0, Started: at(-time.Hour)}
	acked := NodeSession{ID: 2, Expires: at(16 * time.Second), Renewed: at(6 * time.Second), Started: stored.Started}
	u := Unpersisted{}
	u.Add("rgit-1", acked)
	u.Add("rgit-1", NodeSession{ID: 2, Expires: at(13 * time.Second), Renewed: at(3 * time.Second)}) // an older one, late
	if u["rgit-1"].Expires != acked.Expires {
		t.Fatalf("Add shortened the acknowledged expiry: %+v", u["rgit-1"])
	}
	u.Add("rgit-2", NodeSession{ID: 1, Expires: at(12 * time.Second)})

	// The reloaded map: rgit-1 as stored, rgit-2 opened anew since.
	m := NewMap(DefaultTimings())
	if err := m.PutSession("rgit-1", stored); err != nil {
		t.Fatal(err)
	}
	if err := m.PutSession("rgit-2", NodeSession{ID: 2, Expires: at(20 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	u.Reapply(m)
	if s, _ := m.Session("rgit-1"); s != acked {
		t.Fatalf("rgit-1 after Reapply: %+v, want %+v", s, acked)
	}
	if s, _ := m.Session("rgit-2"); s.ID != 2 || !s.Expires.Equal(at(20*time.Second)) {
		t.Fatalf("Reapply touched a replaced session: %+v", s)
	}
	if _, ok := u["rgit-2"]; ok {
		t.Fatal("a replaced session stayed unpersisted")
	}
	// A claim now finds rgit-1's bound entry live until the acknowledged expiry.
	e := Entry{Node: "rgit-1", Epoch: 3, Session: 2, Written: t0}
	if b := m.bind(e); !b.Live(at(15*time.Second)) || b.Live(at(16*time.Second)) {
		t.Fatalf("bound entry expires %s, want 16s", b.Expires.Sub(t0))
	}

	u.Persisted(map[string]NodeSession{"rgit-1": stored}) // an older record: stays
	if _, ok := u["rgit-1"]; !ok {
		t.Fatal("a commit of an older record dropped the acknowledgement")
	}
	u.Persisted(map[string]NodeSession{"rgit-1": acked})
	if len(u) != 0 {
		t.Fatalf("left after the commit: %+v", u)
	}
}
