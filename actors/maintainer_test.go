package actors

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/gitrun"
)

func TestMaintStep(t *testing.T) {
	type row struct {
		from  maintPhase
		ev    maintEvent
		to    maintPhase
		spawn bool
	}
	for _, r := range []row{
		{maintIdle, maintRequested, maintQueued, true},
		{maintQueued, maintRequested, maintQueued, false},
		{maintQueued, maintStarted, maintRunning, false},
		{maintRunning, maintRequested, maintRerun, false},
		{maintRerun, maintRequested, maintRerun, false},
		{maintRunning, maintFinished, maintIdle, false},
		{maintRerun, maintFinished, maintQueued, true},
	} {
		to, spawn := maintStep(r.from, r.ev)
		if to != r.to || spawn != r.spawn {
			t.Errorf("maintStep(%d, %d) = %d, %v; want %d, %v", r.from, r.ev, to, spawn, r.to, r.spawn)
		}
	}
}

// pusher makes one-commit pushes into a repository through the node, the
// way the push path does (index, stage, UpdateRefs in the repo actor),
// then asks for maintenance as the push path does.
type pusher struct {
	t      *testing.T
	n      *Node
	d      repo.Deps
	g      *gitrun.Repo
	i      int
	prev   object.ID
	owner  string
	repoNm string
	// quiet: do not ask for maintenance after a push (the scheduled pass
	// must find the packs).
	quiet bool
}

func (p *pusher) git(stdin []byte, args ...string) []byte {
	p.t.Helper()
	return p.g.Output(stdin, args...)
}

func (p *pusher) push() {
	p.t.Helper()
	p.pushCommits(1)
}

// pushCommits commits k times and pushes the commits in one pack.
// pushSettled pushes count times, each time waiting for the maintenance
// it asked for, so each roll-up sees one more pack.
func (p *pusher) pushSettled(ctx context.Context, count int) {
	p.t.Helper()
	for range count {
		p.push()
		if err := p.n.WaitMaintenance(ctx); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p *pusher) pushCommits(k int) {
	p.t.Helper()
	for range k {
		p.i++
		p.g.Write("f", strings.Repeat(fmt.Sprintf("line %d\n", p.i), 20))
		p.git(nil, "add", ".")
		p.git(nil, "commit", "-q", "-m", fmt.Sprint("c", p.i))
	}
	tip := object.MustID(strings.TrimSpace(string(p.git(nil, "rev-parse", "HEAD"))))
	revs := tip.String() + "\n"
	if !p.prev.IsZero() {
		revs += "^" + p.prev.String() + "\n"
	}
	data := p.git([]byte(revs+"\n"), "pack-objects", "-q", "--stdout", "--revs", "--delta-base-offset")
	ix, err := pack.IndexPack(context.Background(), bytes.NewReader(data), p.d.Cache.TempDir(), pack.IndexOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	ctx := context.Background()
	info, err := repo.StagePack(ctx, p.d, names.MustParse(p.owner+"/"+p.repoNm), ix)
	if err != nil {
		p.t.Fatal(err)
	}
	cmds := []repo.RefUpdate{{Name: "refs/heads/main", Old: p.prev, New: tip}}
	s, err := p.n.Session(ctx, names.MustParse(p.owner+"/"+p.repoNm))
	if err != nil {
		p.t.Fatal(err)
	}
	defer s.Release()
	errs, err := s.UpdateRefs(ctx, &info, cmds, false)
	if err != nil || errs[0] != nil {
		p.t.Fatalf("push %d: %v %v", p.i, err, errs)
	}
	p.prev = tip
	if !p.quiet {
		p.n.Maintain(names.MustParse(p.owner + "/" + p.repoNm))
	}
}

func newPusher(t *testing.T, n *Node, d repo.Deps, owner, name string) *pusher {
	if err := repo.Create(context.Background(), d, names.MustParse(owner+"/"+name)); err != nil {
		t.Fatal(err)
	}
	return &pusher{t: t, n: n, d: d, g: gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@t", "")}), owner: owner, repoNm: name}
}

func packsOf(t *testing.T, n *Node, owner, name string) []repo.PackInfo {
	t.Helper()
	s, err := n.Session(context.Background(), names.MustParse(owner+"/"+name))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	return s.Snapshot.Packs
}

// TestPushesLeaveBoundedPacks: pushes in a loop, each asking for
// maintenance as the push path does, leave O(log) packs holding every
// object.
func TestPushesLeaveBoundedPacks(t *testing.T) {
	d := testDeps(t, memstore.New())
	var done atomic.Int32
	n := startNode(t, Config{Deps: d, WarmTTL: time.Minute, MaxWarm: 8, MaintenanceDone: func() { done.Add(1) }})
	p := newPusher(t, n, d, "alice", "loop")
	const pushes = 60
	for range pushes {
		p.push()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	// Called as the last job ends, before WaitMaintenance returns.
	if done.Load() == 0 {
		t.Error("MaintenanceDone not called once maintenance was over")
	}
	packs := packsOf(t, n, "alice", "loop")
	objects := 0
	for _, pk := range packs {
		objects += pk.Objects
	}
	// 3 objects per push: log2(180) < 8.
	if len(packs) > 8 || objects != 3*pushes {
		t.Fatalf("after %d pushes: %d packs with %d objects: %+v", pushes, len(packs), objects, packs)
	}
	if repo.PlanGeometric(packs, repo.GeometricFactor) != nil {
		t.Fatalf("packs are not a geometric progression: %+v", packs)
	}
	// Full repacks have a bitmap and every partial roll-up a layer over
	// the packs it left: fetches walk only a push not rolled up yet.
	s, err := n.Session(ctx, names.MustParse("alice/loop"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	bm := s.Snapshot.Bitmap(ctx)
	if bm == nil {
		t.Fatal("no bitmap after the roll-ups")
	}
	for _, pk := range packs {
		if !bm.HasBitmap(pk.Name) && pk.Objects > 3 {
			t.Errorf("pack %s of %d objects has no bitmap in the stack", pk.Name, pk.Objects)
		}
	}
}

// TestCloneDuringRollUp: a clone that took its snapshot before a roll-up
// switched the pack list still writes a complete pack, and so does one
// after it.
func TestCloneDuringRollUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n *Node
	var hold atomic.Bool // the next roll-up opens a session first
	var held atomic.Pointer[RepoSession]
	n, d := newMaintNode(t, func(c *Config) {
		c.BeforeRollUp = func(key names.Repo) {
			if !hold.Load() {
				return
			}
			s, err := n.Session(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			held.Store(s)
		}
	})
	p := newPusher(t, n, d, "alice", "clone")
	// One at a time, so the packs are 6 and 3 objects (3 per push)...
	p.pushSettled(ctx, 3)
	// ...and the next push makes the roll-up take every pack; a clone
	// starts just before it is built.
	hold.Store(true)
	p.push()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	during := held.Load()
	if during == nil {
		t.Fatal("no roll-up ran")
	}
	defer during.Release()
	after := packsOf(t, n, "alice", "clone")
	if len(during.Snapshot.Packs) < 2 || len(after) != 1 {
		t.Fatalf("packs during the roll-up %d, after %d", len(during.Snapshot.Packs), len(after))
	}
	ids := strings.Fields(string(p.git(nil, "rev-list", "--objects", "--all", "--no-object-names")))
	want := make([]object.ID, len(ids))
	for i, s := range ids {
		want[i] = object.MustID(s)
	}
	s2, err := n.Session(ctx, names.MustParse("alice/clone"))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	for _, s := range []*RepoSession{during, s2} {
		var buf bytes.Buffer
		if _, err := s.Snapshot.Objects().WritePack(ctx, &buf, want, pack.WriteOptions{OfsDelta: true}); err != nil {
			t.Fatal(err)
		}
		gitrun.Scratch(t, gitrun.Env{}).Output(buf.Bytes(), "index-pack", "--stdin", "--strict")
	}
}

// TestLargestPackGetsBitmap: a big push on top of a small first pack
// makes the largest pack one without a bitmap (only whole-repository
// packs get one), which the geometric plan alone would keep: clones would
// walk the whole history. Maintenance repacks it into one pack with a
// bitmap.
func TestLargestPackGetsBitmap(t *testing.T) {
	n, d := newMaintNode(t, func(c *Config) { c.UnbitmappedGrace = time.Nanosecond })
	p := newPusher(t, n, d, "alice", "import")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.push()
	p.pushCommits(20)
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := n.Session(ctx, names.MustParse("alice/import"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if len(s.Snapshot.Packs) != 1 || s.Snapshot.Packs[0].Objects != 3*21 {
		t.Fatalf("packs after maintenance = %+v, want one of all %d objects", s.Snapshot.Packs, 3*21)
	}
	if s.Snapshot.Bitmap(ctx) == nil {
		t.Fatal("the repacked pack has no bitmap")
	}
}

func TestPlanMaintenance(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	const age = 24 * time.Hour
	young, old := now.Add(-time.Hour), now.Add(-2*age)
	pk := func(name string, objects int, created time.Time) repo.PackInfo {
		return repo.PackInfo{Name: name, Objects: objects, Created: created}
	}
	fresh := now.Add(-defaultUnbitmappedGrace / 2)
	for _, r := range []struct {
		name        string
		packs       []repo.PackInfo
		unbitmapped bool
		kind        maintKind
		roll        []string
	}{
		{"none", nil, false, maintNothing, nil},
		{"one old pack", []repo.PackInfo{pk("a", 100, old)}, false, maintNothing, nil},
		{"progression", []repo.PackInfo{pk("a", 100, young), pk("b", 40, young), pk("c", 10, now)}, false, maintNothing, nil},
		{"largest too old", []repo.PackInfo{pk("a", 100, old), pk("b", 40, young)}, false, maintFull, nil},
		{"small ones roll up", []repo.PackInfo{pk("a", 100, young), pk("b", 1, now), pk("c", 1, now)}, false, maintRollUp, []string{"b", "c"}},
		{"roll-up would take all", []repo.PackInfo{pk("a", 10, young), pk("b", 3, now), pk("c", 3, now)}, false, maintFull, nil},
		{"largest without bitmap", []repo.PackInfo{pk("a", 3, old), pk("b", 100, young)}, true, maintFull, nil},
		{"largest without bitmap, just pushed", []repo.PackInfo{pk("a", 3, old), pk("b", 100, fresh)}, true, maintNothing, nil},
		{"largest without bitmap, small ones roll up", []repo.PackInfo{pk("a", 100, fresh), pk("b", 1, now), pk("c", 1, now)}, true, maintRollUp, []string{"b", "c"}},
		{"one pack without bitmap", []repo.PackInfo{pk("a", 100, young)}, true, maintNothing, nil},
	} {
		kind, roll := planMaintenance(r.packs, !r.unbitmapped, now, age, defaultUnbitmappedGrace)
		if kind != r.kind || !slices.Equal(roll, r.roll) {
			t.Errorf("%s: planMaintenance = %d %v, want %d %v", r.name, kind, roll, r.kind, r.roll)
		}
	}
}

func TestJitteredAndBackoff(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want time.Duration
	}{{0, 75 * time.Second}, {0.5, 100 * time.Second}, {0.999999, 125 * time.Second}} {
		if got := jittered(100*time.Second, c.r); got.Round(time.Second) != c.want {
			t.Errorf("jittered(100s, %v) = %v, want %v", c.r, got, c.want)
		}
	}
	var waits []time.Duration
	var w time.Duration
	for range 9 {
		w = busyBackoff(w, time.Second)
		waits = append(waits, w)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(waits, want) {
		t.Errorf("busy backoff waits = %v, want %v", waits, want)
	}
}

// newMaintNode is newTestNode with cfg changed by edit before the node starts.
func newMaintNode(t *testing.T, edit func(*Config)) (*Node, repo.Deps) {
	t.Helper()
	d := testDeps(t, memstore.New())
	cfg := Config{Deps: d, WarmTTL: time.Minute, MaxWarm: 8}
	edit(&cfg)
	return startNode(t, cfg), d
}

// TestMaintenanceDefersWhileBusy: while the load signal says busy, a
// requested roll-up waits (checking again with backoff) and the packs
// stay as they are; once the node is idle it runs.
func TestMaintenanceDefersWhileBusy(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	checks := make(chan struct{}, 1)
	n, d := newMaintNode(t, func(c *Config) {
		c.Busy = func() bool {
			select {
			case checks <- struct{}{}:
			default:
			}
			return busy.Load()
		}
		c.BusyRetry = time.Millisecond
	})
	p := newPusher(t, n, d, "alice", "busy")
	for range 4 {
		p.push()
	}
	for range 3 { // the job asked, was told busy, and asked again twice
		<-checks
	}
	if got := len(packsOf(t, n, "alice", "busy")); got != 4 {
		t.Fatalf("%d packs while busy, want the 4 pushed", got)
	}
	busy.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(packsOf(t, n, "alice", "busy")); got != 1 {
		t.Fatalf("%d packs after the node became idle, want 1", got)
	}
}

// TestMaintenanceWaitsForMemory: a roll-up the memory budget does not
// admit waits, without holding the repository, and runs once admitted,
// asking for what it rewrites.
func TestMaintenanceWaitsForMemory(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	asked := make(chan int64, 16)
	var released atomic.Int32
	n, d := newMaintNode(t, func(c *Config) {
		c.Reserve = func(objects int64) (func(), bool) {
			select {
			case asked <- objects:
			default:
			}
			if full.Load() {
				return nil, false
			}
			return func() { released.Add(1) }, true
		}
		c.BusyRetry = time.Millisecond
	})
	p := newPusher(t, n, d, "alice", "mem")
	for range 4 {
		p.push()
	}
	// Each retry plans again: it asks for the 4 packs' 12 objects once
	// they are all pushed.
	timeout := time.After(time.Minute)
	for objects := int64(0); objects != 12; {
		select {
		case objects = <-asked:
		case <-timeout:
			t.Fatalf("last asked for %d objects, want the 12 of the 4 packs", objects)
		}
	}
	// Between its asks the job holds no session (it holds one while it
	// plans and asks).
	for deadline := time.Now().Add(time.Minute); n.sessions.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting job keeps a session on the repository")
		}
	}
	if got := len(packsOf(t, n, "alice", "mem")); got != 4 {
		t.Fatalf("%d packs while memory is short, want the 4 pushed", got)
	}
	full.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(packsOf(t, n, "alice", "mem")); got != 1 || released.Load() != 1 {
		t.Fatalf("%d packs and %d releases once admitted, want 1 and 1", got, released.Load())
	}
}

// TestScheduledPassMaintains: packs pushed without a maintenance request
// are repacked by the scheduled pass over the open repositories, into one
// pack with a bitmap.
func TestScheduledPassMaintains(t *testing.T) {
	passed := make(chan struct{}, 1)
	n, d := newMaintNode(t, func(c *Config) {
		c.AfterMaintenancePass = func() {
			select {
			case passed <- struct{}{}:
			default:
			}
		}
	})
	p := newPusher(t, n, d, "alice", "sched")
	p.quiet = true
	for range 4 {
		p.push()
	}
	if got := len(packsOf(t, n, "alice", "sched")); got != 4 {
		t.Fatalf("%d packs before the pass, want 4", got)
	}
	n.maint.schedule(time.Millisecond)
	<-passed
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := n.Session(ctx, names.MustParse("alice/sched"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if got := len(s.Snapshot.Packs); got != 1 {
		t.Fatalf("%d packs after a scheduled pass, want 1", got)
	}
	// The pack that replaced every other one has a bitmap: clones and
	// fetches stay on the bitmap path.
	if s.Snapshot.Bitmap(ctx) == nil {
		t.Fatal("the repacked pack has no bitmap")
	}
}

// TestDrainStopsMaintenance: a roll-up in progress when the node drains is
// abandoned, so its session does not hold the repository past the drain
// and its switch never meets the next owner's fence.
func TestDrainStopsMaintenance(t *testing.T) {
	var n *Node
	var hold atomic.Bool // the next roll-up waits for the maintainer to stop
	entered := make(chan struct{})
	d := testDeps(t, memstore.New())
	n = startNode(t, Config{Deps: d, Cluster: &ClusterConfig{Self: "rgit-0"},
		BeforeRollUp: func(names.Repo) {
			if !hold.Load() {
				return
			}
			close(entered)
			<-n.maint.ctx.Done()
		}})
	p := newPusher(t, n, d, "alice", "drain")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.pushSettled(ctx, 3)
	rolled := func() float64 { return testutil.ToFloat64(n.maint.m.runs.WithLabelValues("rolled_up")) }
	before := rolled()
	hold.Store(true)
	p.push()
	<-entered
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	if err := n.Drain(dctx); err != nil {
		t.Fatalf("drain with a roll-up in progress: %v", err)
	}
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	if after := rolled(); after != before {
		t.Fatalf("a roll-up was switched in during the drain (%v → %v)", before, after)
	}
}
