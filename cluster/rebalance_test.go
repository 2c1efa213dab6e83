package cluster

import (
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

var (
	three = LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}}
	five  = LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}, {"rgit-3", 1}, {"rgit-4", 1}}
)

// without returns l less node.
func without(l LiveSet, node string) LiveSet {
	var out LiveSet
	for _, nw := range l {
		if nw.Node != node {
			out = append(out, nw)
		}
	}
	return out
}

// repoWhere returns the first a/<prefix>-<i> for which ok holds.
func repoWhere(t *testing.T, prefix string, ok func(names.Repo) bool) names.Repo {
	t.Helper()
	for i := range 10000 {
		if r := rn(fmt.Sprintf("a/%s-%d", prefix, i)); ok(r) {
			return r
		}
	}
	t.Fatalf("no repository a/%s-* fits", prefix)
	return names.Repo{}
}

func TestNextMoves(t *testing.T) {
	now := at(time.Hour)
	lim := DefaultRebalanceLimits(2)
	// won: placed on rgit-1 among three nodes, on rgit-3 among five.
	won := func(prefix string) names.Repo {
		return repoWhere(t, prefix, func(r names.Repo) bool {
			return Rendezvous(r, three) == "rgit-1" && Rendezvous(r, five) == "rgit-3"
		})
	}
	joined, joined2, joined3 := won("j"), won("k"), won("l")
	// unsettled: rgit-4 would win it, rgit-3 wins without rgit-4.
	unsettled := repoWhere(t, "u", func(r names.Repo) bool {
		return Rendezvous(r, five) == "rgit-4" && Rendezvous(r, without(five, "rgit-4")) == "rgit-3"
	})
	home := repoWhere(t, "h", func(r names.Repo) bool { return Rendezvous(r, five) == "rgit-1" })
	held := func(r names.Repo) Held { return Held{Repo: r, Node: "rgit-1", Epoch: 7} }
	move := func(r names.Repo, to string) Move {
		return Move{Repo: r, From: "rgit-1", To: to, Epoch: 7, Started: now}
	}
	cases := []struct {
		name   string
		held   []Held
		live   LiveSet
		known  LiveSet
		moving map[names.Repo]Move
		ended  map[names.Repo]time.Time
		want   []Move
	}{
		{"held by its winner: stays", []Held{held(home)}, five, five, nil, nil, nil},
		{"a node joined and wins it: moves there", []Held{held(joined)}, five, five, nil, nil,
			[]Move{move(joined, "rgit-3")}},
		{"holder draining (not live): the drain moves it", []Held{held(joined)}, without(five, "rgit-1"), five, nil, nil, nil},
		{"target known but not live yet: nothing", []Held{held(joined)}, three, five, nil, nil, nil},
		{"a node that left for a moment would win it: stays", []Held{held(unsettled)}, without(five, "rgit-4"), five, nil, nil, nil},
		{"the node is gone for good (session lapsed): moves to the next", []Held{held(unsettled)},
			without(five, "rgit-4"), without(five, "rgit-4"), nil, nil, []Move{move(unsettled, "rgit-3")}},
		{"moved within the cooldown: stays", []Held{held(joined)}, five, five, nil,
			map[names.Repo]time.Time{joined: now.Add(-MoveCooldown + time.Nanosecond)}, nil},
		{"cooldown over: moves", []Held{held(joined)}, five, five, nil,
			map[names.Repo]time.Time{joined: now.Add(-MoveCooldown)}, []Move{move(joined, "rgit-3")}},
		{"already moving: not twice", []Held{held(joined)}, five, five,
			map[names.Repo]Move{joined: move(joined, "rgit-3")}, nil, nil},
		{"bounded in flight, in repository order", []Held{held(joined), held(joined2), held(joined3)}, five, five, nil, nil,
			[]Move{move(joined, "rgit-3"), move(joined2, "rgit-3")}},
		{"bounded counting the moves under way", []Held{held(joined), held(joined2), held(joined3)}, five, five,
			map[names.Repo]Move{home: move(home, "rgit-0")}, nil, []Move{move(joined, "rgit-3")}},
		{"zero weight target: never placed there", []Held{held(joined)},
			LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}, {"rgit-3", 0}, {"rgit-4", 1}}, five, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NextMoves(c.held, c.live, c.known, c.moving, c.ended, now, lim)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestStepMove(t *testing.T) {
	start := at(0)
	lim := DefaultRebalanceLimits(1)
	mv := Move{Repo: rn("a/b"), From: "rgit-1", To: "rgit-3", Epoch: 7, Started: start}
	held := Entry{Node: "rgit-1", Epoch: 7, Expires: at(time.Minute)}
	lapsed := Entry{Node: "rgit-1", Epoch: 7, Expires: at(time.Second)}
	cases := []struct {
		name string
		e    Entry
		ok   bool
		live LiveSet
		now  time.Duration
		want MoveVerdict
	}{
		{"holder still holds it: wait", held, true, five, time.Second, MoveWait},
		{"released and drained: hand over", lapsed, true, five, time.Second, MoveHandOver},
		{"lapsed but the target left: abandoned", lapsed, true, without(five, "rgit-3"), time.Second, MoveAbandoned},
		{"granted to the target since: done", Entry{Node: "rgit-3", Epoch: 8, Expires: at(time.Minute)}, true, five, time.Second, MoveDone},
		{"granted elsewhere since: abandoned", Entry{Node: "rgit-2", Epoch: 8, Expires: at(time.Minute)}, true, five, time.Second, MoveAbandoned},
		{"regranted to the holder since: abandoned", Entry{Node: "rgit-1", Epoch: 8, Expires: at(time.Minute)}, true, five, time.Second, MoveAbandoned},
		{"entry pruned: abandoned", Entry{}, false, five, time.Second, MoveAbandoned},
		{"holder never let go: abandoned at the timeout", held, true, five, MoveTimeout, MoveAbandoned},
		{"just before the timeout: wait", held, true, five, MoveTimeout - time.Nanosecond, MoveWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := StepMove(mv, c.e, c.ok, c.live, at(c.now), lim); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestRebalancerMove follows one move through the map: started by a
// round, prewarmed by the target, then asked of the holder in its
// heartbeat answers, its release not
// taken for the node leaving, handed over once the drain lapsed (bound to
// the target's session), then on cooldown.
func TestRebalancerMove(t *testing.T) {
	m := NewMap(DefaultTimings())
	repo := repoWhere(t, "m", func(r names.Repo) bool {
		return Rendezvous(r, three) == "rgit-1" && Rendezvous(r, five) == "rgit-3"
	})
	for _, n := range []string{"rgit-1", "rgit-3"} {
		if _, err := m.OpenSession(n, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := m.Claim(repo, "rgit-1", at(0), three, Options{}); err != nil || d.Owner != "rgit-1" {
		t.Fatalf("claim: %+v %v", d, err)
	}
	r := NewRebalancer(DefaultRebalanceLimits(4))
	now := at(time.Second)
	round := r.Round(m, func() []Held { return m.Holders(now) }, five, five, now)
	want := Move{Repo: repo, From: "rgit-1", To: "rgit-3", Epoch: 1, Started: now}
	if !reflect.DeepEqual(round.Started, []Move{want}) || len(round.Handed)+len(round.Ended) != 0 {
		t.Fatalf("first round %+v, want %v started", round, want)
	}
	if got := r.Releases("rgit-1"); len(got) != 0 {
		t.Fatalf("holder told to release %v before the target prewarms", got)
	}
	if got := r.Prewarms("rgit-3"); !reflect.DeepEqual(got, []names.Repo{repo}) || len(r.Prewarms("rgit-1")) != 0 {
		t.Fatalf("prewarms of rgit-3 %v", got)
	}
	if got := r.Prewarms("rgit-3"); len(got) != 0 {
		t.Fatalf("target told to prewarm twice: %v", got)
	}
	if got := r.Releases("rgit-1"); !reflect.DeepEqual(got, []names.Repo{repo}) || len(r.Releases("rgit-3")) != 0 {
		t.Fatalf("releases of rgit-1 %v", got)
	}
	if !r.Moving(repo, "rgit-1") || r.Moving(repo, "rgit-3") {
		t.Fatal("Moving does not name the holder's release")
	}
	if _, _, ok := r.Due(m, repo, five, now); ok {
		t.Fatal("due before the holder released")
	}
	if _, err := m.Release("rgit-1", repo, now); err != nil {
		t.Fatal(err)
	}
	drained := now.Add(Drain)
	if _, _, ok := r.Due(m, repo, five, drained.Add(-time.Nanosecond)); ok {
		t.Fatal("due during the drain")
	}
	d, end, ok := r.Due(m, repo, five, drained)
	if !ok || end.Verdict != MoveHandOver || d.Outcome != Granted || !d.Write || d.Owner != "rgit-3" || d.Entry.Epoch != 2 {
		t.Fatalf("at the drain's end: %+v %+v %v, want a hand-over to rgit-3 under epoch 2", d, end, ok)
	}
	if s, _ := m.Session("rgit-3"); d.Entry.Session != s.ID {
		t.Fatalf("handed entry bound to session %d, want rgit-3's %d", d.Entry.Session, s.ID)
	}
	if len(r.Releases("rgit-1")) != 0 || r.Moving(repo, "rgit-1") {
		t.Fatal("move still under way after its hand-over")
	}
	// Claimed back on rgit-0 (say rgit-3 went away): the winner among
	// the three is rgit-1, but the repository just moved. The look finds
	// nothing, and later rounds skip the map until the live nodes change,
	// a round started moves, or RescanEvery passed.
	looked := 0
	back := func() []Held { looked++; return []Held{{Repo: repo, Node: "rgit-0", Epoch: 2}} }
	four := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}, {"rgit-4", 1}}
	after := drained.Add(MoveCooldown)
	for _, c := range []struct {
		at           time.Time
		live         LiveSet
		looks, moves int
	}{
		{after.Add(-time.Second), three, 1, 0}, // within the cooldown
		{after.Add(-time.Second / 2), three, 1, 0},
		{after, three, 1, 0}, // the cooldown ended, but nothing says so
		{after, four, 2, 1},  // the live nodes changed
		{after.Add(time.Second), four, 3, 0},
		{after.Add(2 * time.Second), four, 3, 0},
		{after.Add(time.Second + RescanEvery), four, 4, 0},
	} {
		round := r.Round(m, back, c.live, c.live, c.at)
		if looked != c.looks || len(round.Started) != c.moves {
			t.Fatalf("round at %v with %v: looked %d times and started %v, want %d looks and %d moves",
				c.at.Sub(t0), c.live, looked, round.Started, c.looks, c.moves)
		}
	}
}

func TestMembersAndHolders(t *testing.T) {
	m := NewMap(DefaultTimings())
	for _, n := range []string{"rgit-2", "rgit-0"} {
		if _, err := m.OpenSession(n, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Claim(rn("a/x"), "rgit-2", at(0), nil, Options{}); err != nil {
		t.Fatal(err)
	}
	// A steered grant is a per-repository lease: not a holder.
	if _, err := m.Claim(rn("a/y"), "rgit-0", at(0), LiveSet{{"rgit-1", 1}}, Options{Steer: true}); err != nil {
		t.Fatal(err)
	}
	if got := m.Members(at(time.Second)); !reflect.DeepEqual(got, []string{"rgit-0", "rgit-2"}) {
		t.Fatalf("members %v", got)
	}
	if got, want := m.Holders(at(time.Second)), []Held{{Repo: rn("a/x"), Node: "rgit-2", Epoch: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("holders %v, want %v", got, want)
	}
	if got := m.Members(at(TTL)); len(got) != 0 {
		t.Fatalf("members after the sessions lapsed: %v", got)
	}
	if got := m.Holders(at(TTL)); len(got) != 0 {
		t.Fatalf("holders after the sessions lapsed: %v", got)
	}
}

// BenchmarkHolders is the scan a rebalancing round makes of the whole map
// (Holders: every live bound entry, sorted), which the leader actor runs
// every RebalanceEvery while moves are under way (docs/capacity.md):
//
//	go test ./cluster -run '^$' -bench Holders -benchtime 3x
func BenchmarkHolders(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			now := time.Now()
			m := NewMap(DefaultTimings())
			if err := m.PutSession("rgit-1", NodeSession{ID: 1, Expires: now.Add(time.Hour), Renewed: now, Started: now}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				r := names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))
				if err := m.Put(r, Entry{Node: "rgit-1", Written: now, Epoch: 1, Session: 1}); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time, beside the wall time a shared machine stretches.
			cpu0 := cpuTime(b)
			for b.Loop() {
				if got := len(m.Holders(now)); got != n {
					b.Fatalf("%d holders, want %d", got, n)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
