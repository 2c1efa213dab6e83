package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
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

func TestNextMove(t *testing.T) {
	now := at(time.Hour)
	lim := DefaultRebalanceLimits(2)
	// joined: placed on rgit-1 among three nodes, on rgit-3 among five.
	joined := repoWhere(t, "j", func(r names.Repo) bool {
		return Rendezvous(r, three) == "rgit-1" && Rendezvous(r, five) == "rgit-3"
	})
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
		held   Held
		live   LiveSet
		known  LiveSet
		moving map[names.Repo]Move
		ended  map[names.Repo]time.Time
		want   *Move
	}{
		{"held by its winner: stays", held(home), five, five, nil, nil, nil},
		{"a node joined and wins it: moves there", held(joined), five, five, nil, nil, new(move(joined, "rgit-3"))},
		{"holder draining (not live): the drain moves it", held(joined), without(five, "rgit-1"), five, nil, nil, nil},
		{"target known but not live yet: nothing", held(joined), three, five, nil, nil, nil},
		{"a node that left for a moment would win it: stays", held(unsettled), without(five, "rgit-4"), five, nil, nil, nil},
		{"the node is gone for good (session lapsed): moves to the next", held(unsettled),
			without(five, "rgit-4"), without(five, "rgit-4"), nil, nil, new(move(unsettled, "rgit-3"))},
		{"moved within the cooldown: stays", held(joined), five, five, nil,
			map[names.Repo]time.Time{joined: now.Add(-MoveCooldown + time.Nanosecond)}, nil},
		{"cooldown over: moves", held(joined), five, five, nil,
			map[names.Repo]time.Time{joined: now.Add(-MoveCooldown)}, new(move(joined, "rgit-3"))},
		{"already moving: not twice", held(joined), five, five,
			map[names.Repo]Move{joined: move(joined, "rgit-3")}, nil, nil},
		{"zero weight target: never placed there", held(joined),
			LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}, {"rgit-3", 0}, {"rgit-4", 1}}, five, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := NextMove(c.held, c.live, append(slices.Clip(c.live), c.known...), c.moving, c.ended, now, lim)
			if c.want == nil && ok || c.want != nil && (!ok || !reflect.DeepEqual(got, *c.want)) {
				t.Fatalf("got %v %v, want %v", got, ok, c.want)
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
	round := scanRound(t, r, m, five, five, now)
	want := Move{Repo: repo, From: "rgit-1", To: "rgit-3", Epoch: 1, Started: now}
	if !reflect.DeepEqual(round.Started, []Move{want}) || len(round.Handed)+len(round.Ended) != 0 || round.Scan == nil {
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
	// the three is rgit-1, but the repository just moved. The scan finds
	// nothing, and later rounds read the map only once the live nodes
	// change or RescanEvery passed.
	if err := m.PutSession("rgit-0", NodeSession{ID: 1, Expires: at(time.Hour), Started: t0}); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(repo, Entry{Node: "rgit-0", Epoch: 3, Session: 1, Written: drained}); err != nil {
		t.Fatal(err)
	}
	four := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}, {"rgit-4", 1}}
	after := drained.Add(MoveCooldown)
	for _, c := range []struct {
		at      time.Time
		live    LiveSet
		scanned bool
		moves   int
	}{
		{after.Add(-time.Second), three, true, 0}, // within the cooldown
		{after.Add(-time.Second / 2), three, false, 0},
		{after, three, false, 0}, // the cooldown ended, but nothing says so
		{after, four, true, 1},   // the live nodes changed
		{after.Add(time.Second), four, false, 0},
		{after.Add(2 * time.Second), four, false, 0},
		{after.Add(RescanEvery), four, true, 0}, // the move was abandoned at its timeout: on cooldown
	} {
		round := scanRound(t, r, m, c.live, c.live, c.at)
		if (round.Scan != nil) != c.scanned || len(round.Started) != c.moves {
			t.Fatalf("round at %v with %v: scanned %v and started %v, want %v and %d moves",
				c.at.Sub(t0), c.live, round.Scan != nil, round.Started, c.scanned, c.moves)
		}
	}
}

// TestRebalancerQueue: a round takes the moves its last scan found, in
// repository order, as many as there is room for; each is decided again
// on the entry as it is then; a misplaced entry made after the scan waits
// for the next one (RescanEvery, or the live nodes changing).
func TestRebalancerQueue(t *testing.T) {
	m := NewMap(DefaultTimings())
	openFive(t, m)
	a, b, c := heldMisplaced(t, m, "qa"), heldMisplaced(t, m, "qb"), heldMisplaced(t, m, "qc")
	home := repoWhere(t, "h", func(r names.Repo) bool { return Rendezvous(r, five) == "rgit-1" })
	if err := m.Put(home, Entry{Node: "rgit-1", Epoch: 1, Session: 1, Written: t0}); err != nil {
		t.Fatal(err)
	}
	r := NewRebalancer(DefaultRebalanceLimits(2))
	type want struct {
		scanned bool
		started []names.Repo
	}
	round := func(now time.Time, live LiveSet, w want) {
		t.Helper()
		got := scanRound(t, r, m, live, live, now)
		var started []names.Repo
		for _, mv := range got.Started {
			started = append(started, mv.Repo)
		}
		if (got.Scan != nil) != w.scanned || !reflect.DeepEqual(started, w.started) {
			t.Fatalf("round at %v: scanned %v, started %v; want %v, %v", now.Sub(t0), got.Scan != nil, started, w.scanned, w.started)
		}
	}
	now := at(time.Second)
	round(now, five, want{true, []names.Repo{a, b}})
	round(now.Add(time.Second), five, want{false, nil}) // no room
	// a's move ends; c was claimed by its winner since the scan, and d is
	// placed away from its winner after it.
	if _, err := m.Release("rgit-1", a, now); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(c, Entry{Node: "rgit-3", Epoch: 2, Session: 1, Written: now}); err != nil {
		t.Fatal(err)
	}
	d := heldMisplaced(t, m, "qd")
	round(now.Add(Drain), five, want{false, nil})
	round(now.Add(RescanEvery-time.Nanosecond), five, want{false, nil})
	round(now.Add(RescanEvery), five, want{true, []names.Repo{d}})
	// The live nodes change: a new scan at once, whatever the queue held.
	round(now.Add(RescanEvery+time.Second), three, want{true, nil})
}

// TestRebalancerScan: a round gives out a scan when one is due and none
// is running; rounds meanwhile take moves from the last queue; the result
// replaces the queue, as of the scan's round, and only the result of the
// scan given out is taken back. Each step is a round, or the result of
// the scan given out at step scan (run when given out) taken back.
func TestRebalancerScan(t *testing.T) {
	m := NewMap(DefaultTimings())
	openFive(t, m)
	a, _ := heldMisplaced(t, m, "sa"), heldMisplaced(t, m, "sb")
	// One move at a time, never timed out.
	r := NewRebalancer(RebalanceLimits{InFlight: 1, Timeout: time.Hour, Cooldown: MoveCooldown})
	const round = -1
	steps := []struct {
		name string
		// take: the index of the scan whose result is taken back (the
		// scans given out so far, from 0); round: a round at at with live.
		take    int
		at      time.Duration
		live    LiveSet
		scan    bool // the round gave out a scan
		started []names.Repo
		taken   bool
	}{
		{name: "first round: gives out a scan, nothing queued yet", take: round, at: time.Second, live: five, scan: true},
		{name: "scan running: no second one", take: round, at: 2 * time.Second, live: five},
		{name: "nodes changed, scan running: no second one", take: round, at: 3 * time.Second, live: three},
		{name: "the scan's result is taken back", take: 0, taken: true},
		{name: "its nodes are not the live ones: a new scan; the queue checked against live: nothing moves",
			take: round, at: 4 * time.Second, live: three, scan: true},
		{name: "a result taken back already is refused", take: 0},
		{name: "the new scan's result (nothing to move under three)", take: 1, taken: true},
		{name: "scan current: nothing", take: round, at: 5 * time.Second, live: three},
		{name: "nodes changed: a scan", take: round, at: 6 * time.Second, live: five, scan: true},
		{name: "its result is taken back", take: 2, taken: true},
		{name: "moves start from it, as many as there is room for", take: round, at: 7 * time.Second, live: five, started: []names.Repo{a}},
		{name: "no room: no scan, though one is due", take: round, at: 6*time.Second + RescanEvery, live: five},
	}
	var results []ScanResult
	for _, s := range steps {
		if s.take != round {
			if got := r.Scanned(results[s.take]); got != s.taken {
				t.Fatalf("%s: taken back %v, want %v", s.name, got, s.taken)
			}
			continue
		}
		got := r.Round(m, s.live, s.live, at(s.at))
		var started []names.Repo
		for _, mv := range got.Started {
			started = append(started, mv.Repo)
		}
		if (got.Scan != nil) != s.scan || !reflect.DeepEqual(started, s.started) {
			t.Fatalf("%s: scan given out %v, started %v; want %v, %v", s.name, got.Scan != nil, started, s.scan, s.started)
		}
		if got.Scan != nil {
			res, err := got.Scan.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, res)
		}
	}
	// Found: both at five nodes, none at three (rgit-1 wins them there).
	var found []int
	for _, res := range results {
		found = append(found, res.Found())
	}
	if want := []int{2, 0, 2}; !reflect.DeepEqual(found, want) {
		t.Errorf("the scans found %v, want %v", found, want)
	}
	if other := NewRebalancer(DefaultRebalanceLimits(1)); other.Scanned(results[2]) {
		t.Error("a rebalancer took back another one's scan")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Scan{m: m.Snapshot()}).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled scan: %v, want context.Canceled", err)
	}
}

// TestScanOffTheOwner: a scan reads a snapshot of the map taken by its
// round, which does not read the base; while it runs (here held inside
// the base's Range), the map's owner keeps deciding on the live map, and
// what it decides meanwhile is not in the result, which the rounds check
// again. In a synctest bubble, a round that read the base itself would
// block on the gate with nothing left to run, a deadlock that fails the
// test.
func TestScanOffTheOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := gatedBase{frozenBase: frozenBase{fakeBase{}}, entered: make(chan struct{}), release: make(chan struct{})}
		a, b, c := misplacedRepo(t, "oa"), misplacedRepo(t, "ob"), misplacedRepo(t, "oc")
		for _, repo := range []names.Repo{a, b} {
			base.fakeBase[repo] = Entry{Node: "rgit-1", Epoch: 1, Session: 1, Written: t0}
		}
		m := NewMapOver(DefaultTimings(), base)
		openFive(t, m)
		r := NewRebalancer(DefaultRebalanceLimits(2))
		now := at(time.Second)
		scan := r.Round(m, five, five, now).Scan
		if scan == nil {
			t.Fatal("no scan given out")
		}
		done := make(chan ScanResult)
		go func() {
			res, err := scan.Run(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		<-base.entered
		// The scan is under way. a is claimed by its winner, c placed
		// away from its winner, and the rebalancer goes on.
		if err := m.Put(a, Entry{Node: "rgit-3", Epoch: 2, Session: 1, Written: now}); err != nil {
			t.Fatal(err)
		}
		if d, err := m.Claim(c, "rgit-1", now, five, Options{}); err != nil || d.Outcome != Granted {
			t.Fatalf("claim during the scan: %+v, %v", d, err)
		}
		if got := r.Round(m, five, five, now.Add(time.Second)); got.Scan != nil || len(got.Started) != 0 {
			t.Fatalf("a round during the scan: %+v, want nothing", got)
		}
		close(base.release)
		res := <-done
		if res.Found() != 2 || !r.Scanned(res) {
			t.Fatalf("the scan found %d (want a and b, as of its round), taken back: %v", res.Found(), r.Scanned(res))
		}
		got := r.Round(m, five, five, now.Add(2*time.Second))
		if len(got.Started) != 1 || got.Started[0].Repo != b || got.Scan != nil {
			t.Fatalf("the round after the scan: %+v, want only %s started (a is home, c came after the scan)", got, b)
		}
	})
}

// openFive gives each node of five session 1, live for an hour.
func openFive(t *testing.T, m *Map) {
	t.Helper()
	for _, nw := range five {
		if err := m.PutSession(nw.Node, NodeSession{ID: 1, Expires: at(time.Hour), Started: t0}); err != nil {
			t.Fatal(err)
		}
	}
}

// misplacedRepo returns the first a/<prefix>-<i> whose winner is rgit-1
// among three and rgit-3 among five.
func misplacedRepo(t *testing.T, prefix string) names.Repo {
	t.Helper()
	return repoWhere(t, prefix, func(r names.Repo) bool {
		return Rendezvous(r, three) == "rgit-1" && Rendezvous(r, five) == "rgit-3"
	})
}

// heldMisplaced stores misplacedRepo(prefix) in m, held by rgit-1 under
// session 1: misplaced once rgit-3 is live.
func heldMisplaced(t *testing.T, m *Map, prefix string) names.Repo {
	t.Helper()
	repo := misplacedRepo(t, prefix)
	if err := m.Put(repo, Entry{Node: "rgit-1", Epoch: 1, Session: 1, Written: t0}); err != nil {
		t.Fatal(err)
	}
	return repo
}

// frozenBase is a fakeBase that nothing changes once a map reads it:
// pinning it is free, as pinning the leader's database view is.
type frozenBase struct{ fakeBase }

func (b frozenBase) Fixed() Base { return b }

// gatedBase is a frozenBase whose Range tells entered (once: a second
// Range panics) and waits for release.
type gatedBase struct {
	frozenBase
	entered, release chan struct{}
}

func (b gatedBase) Fixed() Base { return b }

func (b gatedBase) Range(yield func(names.Repo, Entry) bool) {
	close(b.entered)
	<-b.release
	b.frozenBase.Range(yield)
}

// scanRound is a round whose scan, if it gives one out (in the returned
// round's Scan), runs at once and is taken back, and the next round, at
// the same time, starts the moves the scan found: the leader actor's
// next round comes a RebalanceEvery later.
func scanRound(t testing.TB, r *Rebalancer, m *Map, live, known LiveSet, now time.Time) Round {
	t.Helper()
	out := r.Round(m, live, known, now)
	if out.Scan == nil {
		return out
	}
	res, err := out.Scan.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Scanned(res) {
		t.Fatal("the rebalancer did not take back the result of its own scan")
	}
	next := r.Round(m, live, known, now)
	if next.Scan != nil || len(next.Handed)+len(next.Ended) != 0 {
		t.Fatalf("the round after a scan's result %+v, want moves started only", next)
	}
	out.Started = append(out.Started, next.Started...)
	return out
}

func TestMembersAndHeld(t *testing.T) {
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
	if got, want := holders(m, at(time.Second)), []Held{{Repo: rn("a/x"), Node: "rgit-2", Epoch: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("holders %v, want %v", got, want)
	}
	if got := m.Members(at(TTL)); len(got) != 0 {
		t.Fatalf("members after the sessions lapsed: %v", got)
	}
	if got := holders(m, at(TTL)); len(got) != 0 {
		t.Fatalf("holders after the sessions lapsed: %v", got)
	}
}

// holders lists the entries of m that Map.held reads as held at now,
// sorted.
func holders(m *Map, now time.Time) []Held {
	var out []Held
	m.each(func(r names.Repo, e Entry) bool {
		if h, ok := m.held(r, e, now); ok {
			out = append(out, h)
		}
		return true
	})
	slices.SortFunc(out, func(a, b Held) int { return names.Compare(a.Repo, b.Repo) })
	return out
}

// cpuTime is the process's CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestOnHolderRelease(t *testing.T) {
	now := at(time.Hour)
	mine := Entry{Node: "rgit-1", Epoch: 4, Session: 3, Expires: now.Add(TTL)}
	with := func(f func(e *Entry)) Entry { e := mine; f(&e); return e }
	for _, tc := range []struct {
		name          string
		actor, renews bool
		e             Entry
		ok            bool
		want          HolderRelease
	}{
		{"served here", true, true, mine, true, ReleaseDrain},
		{"served, view lagging", true, true, Entry{}, false, ReleaseDrain},
		{"draining or lingering", true, false, mine, true, ReleaseIgnore},
		// A hand-over (or a move here) never opened: released all the
		// same, or it could never move (the move times out, for good).
		{"named here, never opened", false, false, mine, true, ReleaseClaim},
		{"no entry", false, false, Entry{}, false, ReleaseIgnore},
		{"named elsewhere", false, false, with(func(e *Entry) { e.Node = "rgit-2" }), true, ReleaseIgnore},
		{"another session of this node", false, false, with(func(e *Entry) { e.Session = 2 }), true, ReleaseIgnore},
		{"per-repository lease", false, false, with(func(e *Entry) { e.Session = 0 }), true, ReleaseIgnore},
		{"lapsed", false, false, with(func(e *Entry) { e.Expires = now }), true, ReleaseIgnore},
	} {
		if got := OnHolderRelease(tc.actor, tc.renews, tc.e, tc.ok, "rgit-1", 3, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
