package repo

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

func TestPlanGeometric(t *testing.T) {
	for _, tc := range []struct {
		objects []int // pack i is named "p<i>"
		factor  int
		want    string // rolled-up pack names, sorted; "" for none
	}{
		{nil, 2, ""},
		{[]int{5}, 2, ""},
		{[]int{100, 50, 25, 12}, 2, ""},
		{[]int{12, 100, 25, 50}, 2, ""}, // order of the list does not matter
		{[]int{100, 50}, 2, ""},
		{[]int{100, 51}, 2, "p0 p1"},
		{[]int{100, 1, 1, 1, 1}, 2, "p1 p2 p3 p4"},
		{[]int{10, 3, 3}, 2, "p0 p1 p2"},   // the roll-up (6) outgrows half of 10
		{[]int{100, 60, 1}, 2, "p0 p1 p2"}, // broken at the top
		{[]int{1000, 40, 20, 3, 3}, 2, "p3 p4"},
		{[]int{1000, 40, 20, 10, 3, 3}, 2, "p1 p2 p3 p4 p5"}, // 6 takes 10, 20 and 40 with it
		{[]int{1, 1}, 2, "p0 p1"},
		{[]int{0, 0, 0}, 2, "p0 p1 p2"}, // empty packs weigh as one object
		{[]int{100, 1, 1}, 1, ""},       // factor < 2: no plan
		{[]int{9, 3, 1}, 3, ""},
		{[]int{9, 3, 2}, 3, "p0 p1 p2"}, // 5 is more than a third of 9
		{[]int{30, 3, 2}, 3, "p1 p2"},
	} {
		packs := make([]PackInfo, len(tc.objects))
		for i, n := range tc.objects {
			packs[i] = PackInfo{Name: fmt.Sprintf("p%d", i), Objects: n}
		}
		got := strings.Join(PlanGeometric(packs, tc.factor), " ")
		if got != tc.want {
			t.Errorf("PlanGeometric(%v, %d) = %q, want %q", tc.objects, tc.factor, got, tc.want)
		}
	}
}

// TestPlanGeometricKeepsPacksLogarithmic pushes one small pack at a time
// and applies every plan: the count stays within log2 of the objects.
func TestPlanGeometricKeepsPacksLogarithmic(t *testing.T) {
	var packs []PackInfo
	total := 0
	for i := range 1000 {
		packs = append(packs, PackInfo{Name: fmt.Sprintf("push%04d", i), Objects: 3})
		total += 3
		if roll := PlanGeometric(packs, GeometricFactor); roll != nil {
			sum := 0
			packs = slices.DeleteFunc(packs, func(p PackInfo) bool {
				if slices.Contains(roll, p.Name) {
					sum += p.Objects
					return true
				}
				return false
			})
			packs = append(packs, PackInfo{Name: fmt.Sprintf("roll%04d", i), Objects: sum})
		}
		if PlanGeometric(packs, GeometricFactor) != nil {
			t.Fatalf("push %d: plan not stable after applying it: %+v", i, packs)
		}
	}
	if len(packs) > 12 {
		t.Fatalf("%d packs for %d objects after 1000 pushes", len(packs), total)
	}
}

// pushes makes n pushes of one commit each and returns the objects git has.
func pushes(t *testing.T, d Deps, r *Repo, g *gitRepo, n int) map[object.ID][]byte {
	t.Helper()
	return pushesOnto(t, d, r, g, object.ID{}, n)
}

// pushesOnto is pushes on top of main at prev (zero: an empty repository).
func pushesOnto(t *testing.T, d Deps, r *Repo, g *gitRepo, prev object.ID, n int) map[object.ID][]byte {
	t.Helper()
	for range n {
		c := g.commit()
		revs := []string{c.String()}
		if !prev.IsZero() {
			revs = append(revs, "^"+prev.String())
		}
		push(t, r, g.indexPack(d.Cache.TempDir(), revs...), RefUpdate{Name: "refs/heads/main", Old: prev, New: c})
		prev = c
	}
	return g.catAll()
}

// rollUp plans, builds and commits one roll-up from a fresh snapshot.
func rollUp(t *testing.T, r *Repo) (PackInfo, []string) {
	t.Helper()
	s := snapshot(t, r)
	names := PlanGeometric(s.Packs, GeometricFactor)
	b, err := BuildRollUp(ctx, r.d, s, names, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		return PackInfo{}, nil
	}
	info, err := r.CommitRepack(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return info, names
}

func TestRollUpKeepsEveryObject(t *testing.T) { forEachStore(t, testRollUpKeepsEveryObject) }

func testRollUpKeepsEveryObject(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 5)
	old := snapshot(t, r) // a clone running during the roll-up
	info, names := rollUp(t, r)
	if len(names) != 5 {
		t.Fatalf("rolled up %v, want all 5 equal packs", names)
	}
	s := checkRepacked(t, r, info, want)
	// The clone started before the switch still reads its packs (retired,
	// not deleted) and can write a complete pack from them.
	checkObjects(t, old, want)
	ids := make([]object.ID, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	for _, snap := range []*Snapshot{old, s} {
		var buf bytes.Buffer
		if _, err := snap.Objects().WritePack(ctx, &buf, ids, pack.WriteOptions{OfsDelta: true}); err != nil {
			t.Fatal(err)
		}
		g.run(buf.Bytes(), "index-pack", "--stdin", "--strict")
	}
	// The rolled-up pack reused the stored deltas: it is no larger than
	// the packs it replaced.
	var before int64
	for _, p := range old.Packs {
		before += p.Size
	}
	if info.Size > before {
		t.Fatalf("roll-up is %d bytes, the packs it replaced %d", info.Size, before)
	}
	// The replaced packs retire through the grace period.
	now := time.Now()
	if stats, err := gc(r, now.Add(2*time.Hour), time.Hour); err != nil || stats.Retired != 5 {
		t.Fatalf("GC after grace: %+v, %v", stats, err)
	}
	checkObjects(t, snapshot(t, r), want)
}

// TestRollUpDoesNotConflictWithPush: a push landing between the build and
// the switch keeps its pack, and the roll-up still commits.
func TestRollUpDoesNotConflictWithPush(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	pushes(t, d, r, g, 3)
	s := snapshot(t, r)
	b, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, GeometricFactor), nil)
	if err != nil || b == nil {
		t.Fatalf("build: %v, %v", b, err)
	}
	prev := g.rev("HEAD")
	c := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c.String(), "^"+prev.String()),
		RefUpdate{Name: "refs/heads/main", Old: prev, New: c})
	if _, err := r.CommitRepack(ctx, b); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, r)
	if len(after.Packs) != 2 {
		t.Fatalf("packs = %+v, want the roll-up and the new push", after.Packs)
	}
	checkObjects(t, after, g.catAll())
	// A second build from the stale snapshot names packs that are gone.
	b2, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, GeometricFactor), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitRepack(ctx, b2); err == nil || !strings.Contains(err.Error(), ErrConcurrentUpdate.Error()) {
		t.Fatalf("stale roll-up committed: %v", err)
	}
}

// TestRollUpCrashBeforeSwitch: a node that dies after uploading the new
// pack and before the switch leaves the repository as it was; the new
// pack is garbage that GC deletes.
func TestRollUpCrashBeforeSwitch(t *testing.T) { forEachStore(t, testRollUpCrashBeforeSwitch) }

func testRollUpCrashBeforeSwitch(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 4)
	s := snapshot(t, r)
	before := slices.Clone(s.Packs)
	b, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, GeometricFactor), nil)
	if err != nil || b == nil {
		t.Fatalf("build: %v, %v", b, err)
	}
	pk, _ := PackKeys(names.MustParse("o/r"), b.Pack.Name)
	if !slices.Contains(storeKeys(t, st, packPrefix(names.MustParse("o/r"))), pk) {
		t.Fatalf("new pack %s not uploaded", pk)
	}
	// The crash: the writer goes away without the switch; another node
	// (own cache) opens the repository.
	s.Close()
	r.Close(ctx)
	d2 := newDeps(t, st)
	r2, err := Open(ctx, d2, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	s2 := snapshot(t, r2)
	if !slices.Equal(s2.Packs, before) {
		t.Fatalf("packs after crash = %+v, want %+v", s2.Packs, before)
	}
	checkObjects(t, s2, want)
	stats, err := gc(r2, time.Now().Add(2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeletedKeys < 2 || slices.Contains(storeKeys(t, st, packPrefix(names.MustParse("o/r"))), pk) {
		t.Fatalf("GC left the unswitched pack: %+v", stats)
	}
	checkObjects(t, snapshot(t, r2), want)
}

// TestRollUpDropsReplacedPacksFromCache: once a roll-up is committed the
// node's cache no longer holds the packs it replaced (memory, descriptors
// and disk would otherwise grow with every roll-up), while a snapshot
// taken before it still reads them.
func TestRollUpDropsReplacedPacksFromCache(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 4)
	s := snapshot(t, r)
	if got := d.Cache.Stats().Packs; got != 4 {
		t.Fatalf("cache holds %d packs before the roll-up, want 4", got)
	}
	b, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, GeometricFactor), nil)
	if err != nil || b == nil {
		t.Fatalf("build: %v, %v", b, err)
	}
	if _, err := r.CommitRepack(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := d.Cache.Stats().Packs; got != 1 {
		t.Fatalf("cache holds %d packs after the roll-up, want only the new one", got)
	}
	checkObjects(t, s, want) // the old snapshot still reads the replaced packs
	s.Close()
	checkObjects(t, snapshot(t, r), want)
}

// readLog is an object reader that records what it reads.
type readLog struct {
	r    object.Reader
	read map[object.ID]object.Type
}

func (l *readLog) ReadObject(id object.ID) (object.Type, []byte, error) {
	typ, data, err := l.r.ReadObject(id)
	if err == nil {
		l.read[id] = typ
	}
	return typ, data, err
}

// TestFetchAfterPushesWalksOnlyUncoveredCommits: a partial roll-up gets a
// bitmap layer over the bitmapped pack it leaves, so clones and fetches
// stay on the fast path however small packs are pushed and rolled up on
// top of a full repack. The query reads only objects of packs pushed since
// the last roll-up, none the layers cover, and answers exactly what the
// walk does.
func TestFetchAfterPushesWalksOnlyUncoveredCommits(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	const oldCommits, newCommits = 40, 10
	pushes(t, d, r, g, oldCommits)
	whole, names := rollUp(t, r)
	if len(names) != oldCommits {
		t.Fatalf("rolled up %d packs, want all %d", len(names), oldCommits)
	}
	base := g.rev("HEAD")
	pushesOnto(t, d, r, g, base, newCommits)
	// 200 objects and ten packs of 5: the small packs roll up, the
	// bitmapped one stays.
	if _, names := rollUp(t, r); len(names) != newCommits || slices.Contains(names, whole.Name) {
		t.Fatalf("second roll-up took %v, want the %d new packs", names, newCommits)
	}
	s := snapshot(t, r)
	if len(s.Packs) != 2 {
		t.Fatalf("packs = %+v, want the bitmapped roll-up and the roll-up of the new packs", s.Packs)
	}
	bm := s.Bitmap(ctx)
	if bm == nil || len(bm.Packs()) != 2 || bm.Packs()[0].Name() != whole.Name || slices.Contains(bm.Layers(), nil) {
		t.Fatalf("fetches do not use the bitmap of %s with a layer over it", whole.Name)
	}
	covered := pack.NewSet(bm.Packs()...)
	tip := g.rev("HEAD")
	// Pushed since the last roll-up: the query walks these alone.
	const later = 3
	pushesOnto(t, d, r, g, tip, later)
	tip = g.rev("HEAD")
	s = snapshot(t, r)
	if bm = s.Bitmap(ctx); bm == nil || len(bm.Packs()) != 2 {
		t.Fatalf("the stack changed with the new pushes: %v", bm)
	}
	for _, tc := range []struct {
		name  string
		haves []object.ID
		// commits the query may read: those not below a bitmapped one
		commits int
	}{
		{"clone", nil, later},
		{"fetch from the full repack", []object.ID{base}, later},
		{"fetch from the layer", []object.ID{g.rev("HEAD~5")}, later},
		{"fetch from a new commit", []object.ID{g.rev("HEAD~1")}, later},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := walk.Request{Wants: []object.ID{tip}, Haves: tc.haves}
			log := &readLog{r: s.Objects(), read: map[object.ID]object.Type{}}
			if _, err := bm.Objects(ctx, walk.NewGraph(log, 0), req); err != nil {
				t.Fatal(err)
			}
			commits := 0
			for id, typ := range log.read {
				if covered.Has(id) {
					t.Errorf("query read %s %s, which the bitmaps cover", typ, id)
				}
				if typ == object.Commit {
					commits++
				}
			}
			if commits != tc.commits {
				t.Errorf("query read %d commits, want the %d pushed since the last roll-up", commits, tc.commits)
			}
			walked := &readLog{r: s.Objects(), read: map[object.ID]object.Type{}}
			if _, err := walk.Objects(ctx, walk.NewGraph(walked, 0), req); err != nil {
				t.Fatal(err)
			}
			t.Logf("bitmap query read %d objects (%d commits), the walk %d", len(log.read), commits, len(walked.read))
			samePlan(t, s, bm, req)
		})
	}
}
