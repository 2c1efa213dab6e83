package repo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/testkit/gitrun"
)

var ctx = context.Background()

func newDeps(t *testing.T, st objstore.Store) Deps {
	t.Helper()
	c, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return Deps{Store: st, Cache: c}
}

// gitRepo is a scratch repository driven with the git CLI.
type gitRepo struct {
	t   *testing.T
	dir string
	n   int
	g   *gitrun.Repo
}

func newGitRepo(t *testing.T) *gitRepo {
	r := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@t", "2020-01-01T00:00:00Z")})
	return &gitRepo{t: t, dir: r.Dir, g: r}
}

func (g *gitRepo) run(stdin []byte, args ...string) []byte {
	g.t.Helper()
	return g.g.Output(stdin, args...)
}

// commit adds a few modified files so packs contain deltas, and returns the new tip.
func (g *gitRepo) commit() object.ID {
	g.t.Helper()
	g.n++
	for f := 0; f < 3; f++ {
		var b strings.Builder
		for l := 0; l < 40+g.n; l++ {
			b.WriteString("file " + strconv.Itoa(f) + " line " + strconv.Itoa(l) + "\n")
		}
		if err := os.WriteFile(filepath.Join(g.dir, "f"+strconv.Itoa(f)), []byte(b.String()), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.run(nil, "add", ".")
	g.run(nil, "commit", "-q", "-m", "c"+strconv.Itoa(g.n))
	return g.rev("HEAD")
}

func (g *gitRepo) rev(r string) object.ID {
	g.t.Helper()
	return object.MustID(strings.TrimSpace(string(g.run(nil, "rev-parse", r))))
}

// indexPack builds a pack of revs (rev-list syntax, e.g. "new", "^old") with
// git pack-objects and indexes it into dir.
func (g *gitRepo) indexPack(dir string, revs ...string) *pack.Indexed {
	g.t.Helper()
	args := []string{"pack-objects", "-q", "--stdout", "--revs", "--delta-base-offset"}
	var stdin []byte
	for _, r := range revs {
		if r == "--all" { // an option, not a stdin rev
			args = append(args, r)
		} else {
			stdin = append(stdin, r+"\n"...)
		}
	}
	data := g.run(append(stdin, '\n'), args...)
	ix, err := pack.IndexPack(ctx, bytes.NewReader(data), dir, pack.IndexOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	return ix
}

// catAll returns every object reachable from all refs, as git reads it.
func (g *gitRepo) catAll() map[object.ID][]byte {
	g.t.Helper()
	list := g.run(nil, "rev-list", "--objects", "--all", "--no-object-names")
	out := g.run(list, "cat-file", "--batch")
	objs := map[object.ID][]byte{}
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		hdr, err := r.ReadString('\n')
		if err == io.EOF {
			return objs
		}
		f := strings.Fields(hdr)
		size, _ := strconv.Atoi(f[2])
		data := make([]byte, size+1)
		if _, err := io.ReadFull(r, data); err != nil {
			g.t.Fatal(err)
		}
		objs[object.MustID(f[0])] = data[:size]
	}
}

// forEachStore runs f against the in-memory and the file-system store.
func forEachStore(t *testing.T, f func(*testing.T, objstore.Store)) {
	t.Run("mem", func(t *testing.T) { f(t, memstore.New()) })
	t.Run("file", func(t *testing.T) {
		st, err := filestore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f(t, st)
	})
}

// rn names owner/name, which must be valid.
func rn(owner, name string) names.Repo {
	r, err := names.New(owner, name)
	if err != nil {
		panic(err)
	}
	return r
}

func create(t *testing.T, d Deps, name names.Repo) *Repo {
	t.Helper()
	if err := Create(ctx, d, name); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, d, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(ctx) })
	return r
}

// pushFirst commits in g and pushes that commit to r's empty main.
func pushFirst(t *testing.T, d Deps, r *Repo, g *gitRepo) object.ID {
	t.Helper()
	c := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c.String()), RefUpdate{Name: "refs/heads/main", New: c})
	return c
}

// push stages ix and applies cmds non-atomically, failing on any error.
func push(t *testing.T, r *Repo, ix *pack.Indexed, cmds ...RefUpdate) {
	t.Helper()
	var staged *PackInfo
	if ix != nil {
		info, err := r.StagePack(ctx, ix)
		if err != nil {
			t.Fatal(err)
		}
		staged = &info
	}
	res, err := r.UpdateRefs(ctx, staged, cmds, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res {
		if e != nil {
			t.Fatalf("command %d (%s): %v", i, cmds[i].Name, e)
		}
	}
}

func snapshot(t *testing.T, r *Repo) *Snapshot {
	t.Helper()
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// repack builds a pack from a fresh snapshot and commits the switch, as
// the admin command does (there the build runs outside the repo actor).
func repack(t *testing.T, r *Repo, progress pack.ProgressFunc) (PackInfo, error) {
	t.Helper()
	b, err := BuildRepack(ctx, r.d, snapshot(t, r), progress)
	if err != nil || b == nil {
		return PackInfo{}, err
	}
	return r.CommitRepack(ctx, b)
}

// gc runs both halves of a garbage collection: the plan by the writer, the
// deletions by anyone.
func gc(r *Repo, now time.Time, minAge time.Duration) (GCStats, error) {
	p, err := r.PlanGC(ctx, now, minAge)
	if err != nil {
		return GCStats{}, err
	}
	return Collect(ctx, r.d, p)
}

func storeKeys(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range st.List(ctx, prefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// checkObjects asserts every object git has is readable with equal content.
// onlyPack returns r's snapshot after asserting that info is its one pack.
func onlyPack(t *testing.T, r *Repo, info PackInfo) *Snapshot {
	t.Helper()
	s := snapshot(t, r)
	if len(s.Packs) != 1 || s.Packs[0].Name != info.Name {
		t.Fatalf("packs = %+v, want %s alone", s.Packs, info.Name)
	}
	return s
}

// checkRepacked asserts that info, r's one pack, holds exactly want, and
// returns r's snapshot.
func checkRepacked(t *testing.T, r *Repo, info PackInfo, want map[object.ID][]byte) *Snapshot {
	t.Helper()
	if info.Objects != len(want) {
		t.Fatalf("new pack has %d objects, git has %d", info.Objects, len(want))
	}
	s := onlyPack(t, r, info)
	checkObjects(t, s, want)
	return s
}

func checkObjects(t *testing.T, s *Snapshot, want map[object.ID][]byte) {
	t.Helper()
	for id, data := range want {
		_, got, err := s.Objects().ReadObject(id)
		if err != nil {
			t.Fatalf("ReadObject(%s): %v", id, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("ReadObject(%s): content differs from git cat-file", id)
		}
	}
}

func TestCreateOpenExists(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	if _, err := Open(ctx, d, names.MustParse("o/missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a missing repo: %v, want ErrNotFound", err)
	}
	if keys := storeKeys(t, st, ""); len(keys) != 0 {
		t.Fatalf("Open of a missing repo wrote %v", keys)
	}
	if ok, err := Exists(ctx, d, names.MustParse("o/r")); ok || err != nil {
		t.Fatalf("Exists before Create = %v, %v", ok, err)
	}
	r := create(t, d, names.MustParse("o/r"))
	if ok, err := Exists(ctx, d, names.MustParse("o/r")); !ok || err != nil {
		t.Fatalf("Exists after Create = %v, %v", ok, err)
	}
	if err := Create(ctx, d, names.MustParse("o/r")); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	info := r.Info()
	if info.Head != "refs/heads/main" || info.Public || info.Created.IsZero() || info.Repo != rn("o", "r") {
		t.Fatalf("Info = %+v", info)
	}
	if err := r.SetHead(ctx, "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := r.SetHead(ctx, "HEAD"); err == nil {
		t.Fatal("SetHead accepted a name outside refs/")
	}
	s := snapshot(t, r)
	if s.Head != "refs/heads/dev" || !s.Public || len(s.Refs) != 0 || len(s.Packs) != 0 {
		t.Fatalf("snapshot = %+v", s)
	}
}

func TestPushThenReopenReadsEverything(t *testing.T) {
	forEachStore(t, testPushThenReopenReadsEverything)
}

func testPushThenReopenReadsEverything(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	g.commit()
	tip := g.commit()
	g.run(nil, "tag", "-a", "-m", "release", "v1")
	g.run(nil, "tag", "-a", "-m", "tag of tag", "v1-outer", "v1")
	tag, outer := g.rev("refs/tags/v1"), g.rev("refs/tags/v1-outer")
	ix := g.indexPack(d.Cache.TempDir(), "--all")
	push(t, r, ix,
		RefUpdate{Name: "refs/heads/main", New: tip},
		RefUpdate{Name: "refs/tags/v1", New: tag},
		RefUpdate{Name: "refs/tags/v1-outer", New: outer})
	if _, err := os.Stat(ix.PackPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staged pack was not adopted into the cache: %v", err)
	}
	r.Close(ctx)

	// A fresh node: new cache, new writer.
	d2 := newDeps(t, st)
	r2, err := Open(ctx, d2, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	s := snapshot(t, r2)
	wantRefs := []Ref{{"refs/heads/main", tip}, {"refs/tags/v1", tag}, {"refs/tags/v1-outer", outer}}
	if !slices.Equal(s.Refs, wantRefs) {
		t.Fatalf("refs = %v, want %v", s.Refs, wantRefs)
	}
	if len(s.Packs) != 1 || s.Packs[0].Name != ix.Name || s.Packs[0].Objects != len(ix.Objects) {
		t.Fatalf("packs = %+v", s.Packs)
	}
	checkObjects(t, s, g.catAll())
	for _, ref := range []string{"refs/tags/v1", "refs/tags/v1-outer", "refs/heads/main"} {
		id, _ := s.Ref(ref)
		p, isTag, err := s.Peeled(id)
		if err != nil || p != tip || isTag != (ref != "refs/heads/main") {
			t.Fatalf("Peeled(%s) = %s, %v, %v; want %s", ref, p, isTag, err, tip)
		}
	}
	// Nothing changed: the next snapshot shares the open pack set.
	s2 := snapshot(t, r2)
	if s2.Objects() != s.Objects() {
		t.Fatal("unchanged repository produced a new pack set")
	}
	if got := d2.Cache.Stats(); got.Misses != 1 {
		t.Fatalf("cache stats = %+v, want exactly one download", got)
	}
}

func TestUpdateRefsConflicts(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := g.commit()
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), "--all"),
		RefUpdate{Name: "refs/heads/a", New: c1}, RefUpdate{Name: "refs/heads/b", New: c1})
	c3 := g.commit()
	stale := []RefUpdate{
		{Name: "refs/heads/a", Old: c1, New: c2}, // fine
		{Name: "refs/heads/b", Old: c2, New: c3}, // b is at c1: stale
		{Name: "refs/heads/c", New: c3},          // create: fine
		{Name: "refs/heads/a", New: c3},          // duplicate: invalid
	}
	ix := g.indexPack(d.Cache.TempDir(), "--all")
	info, err := r.StagePack(ctx, ix)
	if err != nil {
		t.Fatal(err)
	}

	res, err := r.UpdateRefs(ctx, &info, stale[:3], true)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != ErrAtomicFailed || !errors.Is(res[1], ErrStale) || res[2] != ErrAtomicFailed {
		t.Fatalf("atomic results = %v", res)
	}
	s := snapshot(t, r)
	if id, _ := s.Ref("refs/heads/a"); id != c1 || len(s.Packs) != 1 {
		t.Fatalf("failed atomic push changed state: a=%s packs=%d", id, len(s.Packs))
	}

	res, err = r.UpdateRefs(ctx, &info, stale, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != nil || !errors.Is(res[1], ErrStale) || res[2] != nil || !errors.Is(res[3], ErrInvalidUpdate) {
		t.Fatalf("non-atomic results = %v", res)
	}
	s = snapshot(t, r)
	a, _ := s.Ref("refs/heads/a")
	b, _ := s.Ref("refs/heads/b")
	c, _ := s.Ref("refs/heads/c")
	if a != c2 || b != c1 || c != c3 || len(s.Packs) != 2 {
		t.Fatalf("after non-atomic push a=%s b=%s c=%s packs=%d", a, b, c, len(s.Packs))
	}

	// Every command failing commits nothing, not even the pack entry.
	ix3 := g.indexPack(d.Cache.TempDir(), g.commit().String(), "^"+c3.String())
	info3, err := r.StagePack(ctx, ix3)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.UpdateRefs(ctx, &info3, []RefUpdate{{Name: "refs/heads/c", New: c1}}, false)
	if err != nil || !errors.Is(res[0], ErrStale) {
		t.Fatalf("create of existing ref: %v, %v", res, err)
	}
	if s := snapshot(t, r); len(s.Packs) != 2 {
		t.Fatalf("pack listed although no command landed: %v", s.Packs)
	}
	// Deletion needs the right old value.
	push(t, r, nil, RefUpdate{Name: "refs/heads/b", Old: c1})
	if _, ok := snapshot(t, r).Ref("refs/heads/b"); ok {
		t.Fatal("deleted ref still present")
	}
}

func TestFencedWriterCannotUpdate(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r1 := create(t, d, names.MustParse("o/r"))
	r2, err := Open(ctx, d, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	g := newGitRepo(t)
	tip := g.commit()
	_, err = r1.UpdateRefs(ctx, nil, []RefUpdate{{Name: "refs/heads/main", New: tip}}, false)
	if !errors.Is(err, refdb.ErrFenced) {
		t.Fatalf("UpdateRefs on a fenced writer: %v, want ErrFenced", err)
	}
	if err := r1.SetVisibility(ctx, true); !errors.Is(err, refdb.ErrFenced) {
		t.Fatalf("SetVisibility on a fenced writer: %v", err)
	}
	if _, ok := snapshot(t, r2).Ref("refs/heads/main"); ok {
		t.Fatal("fenced writer's update is visible")
	}
}

func TestForkIsolation(t *testing.T) { forEachStore(t, testForkIsolation) }

func testForkIsolation(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	src := create(t, d, names.MustParse("o/src"))
	g := newGitRepo(t)
	c1 := g.commit()
	push(t, src, g.indexPack(d.Cache.TempDir(), "--all"), RefUpdate{Name: "refs/heads/main", New: c1})
	if err := src.SetHead(ctx, "refs/heads/main"); err != nil {
		t.Fatal(err)
	}
	if err := Fork(ctx, d, snapshot(t, src), names.MustParse("p/fork")); err != nil {
		t.Fatal(err)
	}
	if err := Fork(ctx, d, snapshot(t, src), names.MustParse("p/fork")); !errors.Is(err, ErrExists) {
		t.Fatalf("second Fork: %v, want ErrExists", err)
	}
	fork, err := Open(ctx, d, names.MustParse("p/fork"))
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close(ctx)
	c2 := g.commit()
	push(t, fork, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String()),
		RefUpdate{Name: "refs/heads/main", Old: c1, New: c2})
	if id, _ := snapshot(t, src).Ref("refs/heads/main"); id != c1 {
		t.Fatalf("push to fork moved the source to %s", id)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, d, names.MustParse("o/src")); err != nil {
		t.Fatal(err)
	}
	// Read the fork through a cold cache: every byte must come from its own keys.
	d2 := newDeps(t, st)
	fork2, err := Open(ctx, d2, names.MustParse("p/fork"))
	if err != nil {
		t.Fatal(err)
	}
	defer fork2.Close(ctx)
	s := snapshot(t, fork2)
	if id, _ := s.Ref("refs/heads/main"); id != c2 || s.Head != "refs/heads/main" || s.Public {
		t.Fatalf("fork: main=%s head=%s public=%v", id, s.Head, s.Public)
	}
	checkObjects(t, s, g.catAll())
}

func TestDeleteThenRecreateStartsEmpty(t *testing.T) {
	forEachStore(t, testDeleteThenRecreateStartsEmpty)
}

func testDeleteThenRecreateStartsEmpty(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	push(t, r, g.indexPack(d.Cache.TempDir(), "--all"), RefUpdate{Name: "refs/heads/main", New: g.commit()})
	r.Close(ctx)
	if err := Delete(ctx, d, names.MustParse("o/r")); err != nil {
		t.Fatal(err)
	}
	if keys := storeKeys(t, st, ""); len(keys) != 0 {
		t.Fatalf("Delete left %v", keys)
	}
	if st := d.Cache.Stats(); st.Packs != 0 {
		t.Fatalf("Delete left cached packs: %+v", st)
	}
	if err := Delete(ctx, d, names.MustParse("o/r")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	r2 := create(t, d, names.MustParse("o/r"))
	s := snapshot(t, r2)
	if len(s.Refs) != 0 || len(s.Packs) != 0 || s.Public {
		t.Fatalf("recreated repo not empty: %+v", s)
	}
}

func TestRepackKeepsObjectsAndGCRetiresLater(t *testing.T) {
	forEachStore(t, testRepackKeepsObjectsAndGCRetiresLater)
}

func testRepackKeepsObjectsAndGCRetiresLater(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String()),
		RefUpdate{Name: "refs/heads/main", Old: c1, New: c2})
	g.run(nil, "tag", "-a", "-m", "t", "v1", c1.String())
	tag := g.rev("refs/tags/v1")
	push(t, r, g.indexPack(d.Cache.TempDir(), tag.String(), "^"+c2.String()), RefUpdate{Name: "refs/tags/v1", New: tag})
	old := snapshot(t, r) // a clone still running over the old packs
	if len(old.Packs) != 3 {
		t.Fatalf("packs before repack = %d", len(old.Packs))
	}

	var stages []string
	info, err := repack(t, r, func(stage string, done, total uint64) {
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repack progress stages: %v", stages)
	want := g.catAll()
	checkRepacked(t, r, info, want)
	checkObjects(t, old, want) // the old view keeps working

	// Within the grace period nothing goes; after it the retired packs do.
	now := time.Now()
	stats, err := gc(r, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// 3 old packs with their idx, the new pack with idx and bitmap.
	if stats.DeletedKeys != 0 || len(storeKeys(t, st, packPrefix(names.MustParse("o/r")))) != 9 {
		t.Fatalf("GC inside grace: %+v", stats)
	}
	stats, err = gc(r, now.Add(2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Retired != 3 || stats.DeletedKeys != 6 {
		t.Fatalf("GC after grace: %+v", stats)
	}
	pk, ik := PackKeys(names.MustParse("o/r"), info.Name)
	if keys := storeKeys(t, st, packPrefix(names.MustParse("o/r"))); !slices.Equal(keys, []string{BitmapKey(names.MustParse("o/r"), info.Name), ik, pk}) {
		t.Fatalf("pack objects after GC = %v", keys)
	}
	// A fresh node reads everything from the single pack.
	d2 := newDeps(t, st)
	r.Close(ctx)
	r2, err := Open(ctx, d2, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	checkObjects(t, snapshot(t, r2), want)
}

func TestGCDeletesOnlyOldUnlistedPacks(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	// A rejected push: staged, never listed.
	if _, err := r.StagePack(ctx, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String())); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	stats, err := gc(r, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeletedKeys != 0 || stats.KeptYoung != 2 || stats.Listed != 1 {
		t.Fatalf("GC of a young staged pack: %+v", stats)
	}
	r.Close(ctx)
	// A writer on another node (a fresh handle) once the pack is old.
	r2, err := Open(ctx, d, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	stats, err = gc(r2, now.Add(2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeletedKeys != 2 || stats.KeptYoung != 0 {
		t.Fatalf("GC of an old staged pack: %+v", stats)
	}
	s := snapshot(t, r2)
	if len(s.Packs) != 1 || len(storeKeys(t, st, packPrefix(names.MustParse("o/r")))) != 2 {
		t.Fatalf("listed pack lost: %+v", s.Packs)
	}
	_, _, err = s.Objects().ReadObject(c1)
	if err != nil {
		t.Fatal(err)
	}
}

// A repository without a database (a crashed fork or delete) is collected
// from the store alone; one with a database is refused, so nothing but its
// writer ever plans it.
func TestOrphanGC(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	pushFirst(t, d, r, g)
	now := time.Now().Add(2 * time.Hour)
	if _, err := PlanOrphanGC(ctx, d, names.MustParse("o/r"), now, time.Hour); !errors.Is(err, ErrExists) {
		t.Fatalf("orphan GC of a live repository: %v, want ErrExists", err)
	}
	if err := refdb.Destroy(ctx, st, dbPrefix(names.MustParse("o/r"))); err != nil {
		t.Fatal(err)
	}
	p, err := PlanOrphanGC(ctx, d, names.MustParse("o/r"), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := Collect(ctx, d, p)
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeletedKeys != 2 || len(storeKeys(t, st, packPrefix(names.MustParse("o/r")))) != 0 {
		t.Fatalf("orphan GC: %+v, left %v", stats, storeKeys(t, st, packPrefix(names.MustParse("o/r"))))
	}
}

func TestRepackDropsUnreachableAndDetectsConcurrentPush(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String()), RefUpdate{Name: "refs/heads/tmp", New: c2})
	push(t, r, nil, RefUpdate{Name: "refs/heads/tmp", Old: c2}) // c2 is now unreachable

	// A push landing between the build and the switch fails the switch.
	b, err := BuildRepack(ctx, d, snapshot(t, r), nil)
	if err != nil {
		t.Fatal(err)
	}
	push(t, r, nil, RefUpdate{Name: "refs/heads/other", New: c1})
	_, err = r.CommitRepack(ctx, b)
	if !errors.Is(err, ErrConcurrentUpdate) {
		t.Fatalf("Repack with a concurrent push: %v, want ErrConcurrentUpdate", err)
	}
	if s := snapshot(t, r); len(s.Packs) != 2 {
		t.Fatalf("failed repack changed the pack list: %+v", s.Packs)
	}

	info, err := repack(t, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := onlyPack(t, r, info)
	if s.Objects().Has(c2) {
		t.Fatal("unreachable commit survived the repack")
	}
	if _, _, err := s.Objects().ReadObject(c1); err != nil {
		t.Fatalf("reachable commit lost: %v", err)
	}
	// Repacking a single pack again reproduces it byte for byte and must
	// not retire the pack it just listed.
	again, err := repack(t, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	onlyPack(t, r, again)
}

func BenchmarkSnapshotUnchanged(b *testing.B) {
	st := memstore.New()
	c, err := packcache.Open(b.TempDir(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	d := Deps{Store: st, Cache: c}
	if err := Create(ctx, d, names.MustParse("o/r")); err != nil {
		b.Fatal(err)
	}
	r, err := Open(ctx, d, names.MustParse("o/r"))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	b.ReportAllocs()
	for b.Loop() {
		s, err := r.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// TestNewerLayoutRefused: a repository whose database says a layout
// version this build does not read (a newer release wrote it) is refused
// with an error naming the version before anything in it is read; one
// without the key (every repository written so far) has layout 1.
func TestNewerLayoutRefused(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	on := names.MustParse("o/n")
	if err := Create(ctx, d, on); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPacks(ctx, d, on); err != nil {
		t.Fatalf("layout 1 (no %s): %v", keyFormat, err)
	}
	db, err := refdb.Open(ctx, st, dbPrefix(on), refdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newer := strconv.FormatUint(uint64(format.Repository.Newest+1), 10)
	if _, err := db.Commit(ctx, refdb.Txn{refdb.Set(keyFormat, []byte(newer))}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = ReadPacks(ctx, d, on)
	if !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), "repository layout version "+newer+" ") {
		t.Fatalf("ReadPacks over layout %s: %v, want a refusal naming it", newer, err)
	}
	r, err := Open(ctx, d, on)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if _, err := r.Snapshot(ctx); !errors.Is(err, format.ErrUnsupported) {
		t.Fatalf("Snapshot over layout %s: %v, want a refusal", newer, err)
	}
}
