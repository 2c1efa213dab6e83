package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

func TestStep(t *testing.T) {
	now := at(time.Second)
	drainEnd := now.Add(Drain)
	draining := Holder{State: Draining, DrainUntil: drainEnd}
	cases := []struct {
		name string
		from Holder
		ev   Event
		at   time.Time
		to   HolderState
		acts []Action
	}{
		{"claim granted opens", Holder{}, Event{Kind: EvGranted}, now, Serving, []Action{{Kind: OpenDB}}},
		{"claim redirected forwards", Holder{}, Event{Kind: EvRedirected, Node: "rgit-2"}, now, Closed, []Action{{Kind: ForwardTo, Node: "rgit-2"}}},
		{"claim leader unreachable 503", Holder{}, Event{Kind: EvLeaderUnreachable}, now, Closed, []Action{{Kind: Respond503}}},
		{"serving leader unreachable keeps serving", Holder{State: Serving}, Event{Kind: EvLeaderUnreachable}, now, Serving, nil},
		{"renew declined closes at once", Holder{State: Serving}, Event{Kind: EvRenewDeclined}, now, Closed, []Action{{Kind: CloseDB}}},
		{"fenced closes", Holder{State: Serving}, Event{Kind: EvFenced}, now, Closed, []Action{{Kind: CloseDB}}},
		{"release drains", Holder{State: Serving}, Event{Kind: EvReleaseStarted}, now, Draining, []Action{{Kind: SendRelease}, {Kind: WakeAt, At: drainEnd}}},
		{"tick before drain end", draining, Event{Kind: EvTick}, drainEnd.Add(-time.Nanosecond), Draining, nil},
		{"tick at drain end closes", draining, Event{Kind: EvTick}, drainEnd, Closed, []Action{{Kind: CloseDB}}},
		{"draining fenced closes", draining, Event{Kind: EvFenced}, now, Closed, []Action{{Kind: CloseDB}}},
		{"draining renew declined closes", draining, Event{Kind: EvRenewDeclined}, now, Closed, []Action{{Kind: CloseDB}}},
		{"duplicate grant ignored", Holder{State: Serving}, Event{Kind: EvGranted}, now, Serving, nil},
		{"closed is terminal", Holder{State: Closed}, Event{Kind: EvGranted}, now, Closed, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, acts := Step(c.from, c.ev, c.at)
			if h.State != c.to || !reflect.DeepEqual(acts, c.acts) {
				t.Fatalf("got %v %v, want %v %v", h.State, acts, c.to, c.acts)
			}
		})
	}
}

func TestHolderCustomDrainAndRenews(t *testing.T) {
	h, acts := NewServing(2 * time.Second)
	if !reflect.DeepEqual(acts, []Action{{Kind: OpenDB}}) || !h.Renews() {
		t.Fatalf("NewServing: %v %v", h, acts)
	}
	h, _ = Step(h, Event{Kind: EvReleaseStarted}, t0)
	if !h.DrainUntil.Equal(at(2*time.Second)) || h.Renews() {
		t.Fatalf("custom drain: %+v", h)
	}
	if NewHolder(time.Second).State != Claiming {
		t.Fatal("NewHolder not claiming")
	}
}

func TestEventOf(t *testing.T) {
	cases := []struct {
		d    Decision
		want Event
	}{
		{Decision{Outcome: Granted, Owner: "rgit-1"}, Event{Kind: EvGranted}},
		{Decision{Outcome: Extended, Owner: "rgit-1"}, Event{Kind: EvGranted}},
		{Decision{Outcome: Granted, Owner: "rgit-2", Steered: true}, Event{Kind: EvRedirected, Node: "rgit-2"}},
		{Decision{Outcome: Refused, Owner: "rgit-2"}, Event{Kind: EvRedirected, Node: "rgit-2"}},
		{Decision{Outcome: Refused}, Event{Kind: EvLeaderUnreachable}},
	}
	for _, c := range cases {
		if got := EventOf(c.d, "rgit-1"); got != c.want {
			t.Errorf("EventOf(%+v) = %+v, want %+v", c.d, got, c.want)
		}
	}
}

func TestRoute(t *testing.T) {
	m := mapWith(map[names.Repo]Entry{
		rn("a/mine"):    {Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 1},
		rn("a/theirs"):  {Node: "rgit-2", Expires: at(10 * time.Second), Written: t0, Epoch: 1},
		rn("a/expired"): {Node: "rgit-2", Expires: at(time.Second), Written: t0, Epoch: 1},
	})
	cases := map[names.Repo]RouteDecision{
		rn("a/mine"):    {Kind: Serve, Node: "rgit-1"},
		rn("a/theirs"):  {Kind: Forward, Node: "rgit-2"},
		rn("a/expired"): {Kind: Claim},
		rn("a/none"):    {Kind: Claim},
	}
	for repo, want := range cases {
		if got := Locate(m, repo, "rgit-1", at(time.Second), at(time.Second)); got != want {
			t.Errorf("%s: %v, want %v", repo, got, want)
		}
	}
	if got := Locate(m, rn("a/mine"), "rgit-1", at(10*time.Second), at(10*time.Second)); got.Kind != Claim {
		t.Errorf("own expired lease routes %v, want claim", got)
	}
}

func TestOnClaimStoreDown(t *testing.T) {
	m := mapWith(map[names.Repo]Entry{
		rn("a/mine"):    {Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 1},
		rn("a/expired"): {Node: "rgit-2", Expires: at(time.Second), Written: t0, Epoch: 1},
		rn("a/theirs"):  {Node: "rgit-2", Expires: at(10 * time.Second), Written: t0, Epoch: 1},
	})
	for _, c := range []struct {
		repo string
		node string
		ok   bool
	}{
		{"a/none", "", false},
		{"a/mine", "", false},
		{"a/expired", "rgit-2", true},
		{"a/theirs", "rgit-2", true},
	} {
		if node, ok := OnClaimStoreDown(m, rn(c.repo), "rgit-1"); node != c.node || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.repo, node, ok, c.node, c.ok)
		}
	}
}

func TestOnConnectFailure(t *testing.T) {
	s := make(Suspicions)
	d := OnConnectFailure(s, rn("a/b"), "rgit-2", t0)
	if d.Kind != Reread || !d.At.Equal(t0.Add(ForceGrantWait)) {
		t.Fatalf("first failure: %v", d)
	}
	// A concurrent failure inside the wait is not the second failure; it
	// waits as long as a first one, from its own failure.
	if d := OnConnectFailure(s, rn("a/b"), "rgit-2", at(100*time.Millisecond)); d.Kind != Reread || !d.At.Equal(at(100*time.Millisecond+ForceGrantWait)) {
		t.Fatalf("inside wait: %v", d)
	}
	// A different owner after the re-read starts over.
	if d := OnConnectFailure(s, rn("a/b"), "rgit-3", at(400*time.Millisecond)); d.Kind != Reread {
		t.Fatalf("new owner: %v", d)
	}
	if d := OnConnectFailure(s, rn("a/b"), "rgit-3", at(750*time.Millisecond)); d.Kind != AskForce || d.Dead != "rgit-3" {
		t.Fatalf("second failure: %v", d)
	}
	// A failure at the same instant rests on the same evidence and asks
	// too; a later one starts over.
	if d := OnConnectFailure(s, rn("a/b"), "rgit-3", at(750*time.Millisecond)); d.Kind != AskForce {
		t.Fatalf("same instant as the ask: %v", d)
	}
	if d := OnConnectFailure(s, rn("a/b"), "rgit-3", at(751*time.Millisecond)); d.Kind != Reread {
		t.Fatalf("after the ask: %v", d)
	}
	// A success in between clears; a stale first failure does not count.
	OnConnectFailure(s, rn("a/b"), "rgit-2", t0)
	OnConnectSuccess(s, rn("a/b"))
	if d := OnConnectFailure(s, rn("a/b"), "rgit-2", at(time.Second)); d.Kind != Reread {
		t.Fatalf("after success: %v", d)
	}
	if d := OnConnectFailure(s, rn("a/b"), "rgit-2", at(time.Second+TTL+time.Millisecond)); d.Kind != Reread {
		t.Fatalf("stale suspicion: %v", d)
	}
}

func TestForceStillDue(t *testing.T) {
	before := Entry{Node: "rgit-1", Epoch: 4, Expires: at(10 * time.Second)}
	for _, tc := range []struct {
		name string
		now  Entry
		ok   bool
		want bool
	}{
		{"unchanged", before, true, true},
		{"lapsed since (the node's session ended)", Entry{Node: "rgit-1", Epoch: 4, Expires: at(2 * time.Second)}, true, true},
		{"renewed since: alive", Entry{Node: "rgit-1", Epoch: 4, Expires: at(13 * time.Second)}, true, false},
		{"claimed again by the same node", Entry{Node: "rgit-1", Epoch: 5, Expires: at(20 * time.Second)}, true, false},
		{"moved elsewhere", Entry{Node: "rgit-2", Epoch: 5, Expires: at(20 * time.Second)}, true, false},
		{"gone from the map", Entry{}, false, false},
	} {
		if got := ForceStillDue(before, tc.now, tc.ok, "rgit-1"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
