package actors

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
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
	dir    string
	i      int
	prev   object.ID
	owner  string
	repoNm string
}

func (p *pusher) git(stdin []byte, args ...string) []byte {
	p.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("git %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

func (p *pusher) push() {
	p.t.Helper()
	p.i++
	if err := os.WriteFile(filepath.Join(p.dir, "f"), []byte(strings.Repeat(fmt.Sprintf("line %d\n", p.i), 20)), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.git(nil, "add", ".")
	p.git(nil, "commit", "-q", "-m", fmt.Sprint("c", p.i))
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
	info, err := repo.StagePack(ctx, p.d, p.owner, p.repoNm, ix)
	if err != nil {
		p.t.Fatal(err)
	}
	cmds := []repo.RefUpdate{{Name: "refs/heads/main", Old: p.prev, New: tip}}
	s, err := p.n.Session(ctx, p.owner, p.repoNm)
	if err != nil {
		p.t.Fatal(err)
	}
	defer s.Release()
	errs, err := s.UpdateRefs(ctx, &info, cmds, false)
	if err != nil || errs[0] != nil {
		p.t.Fatalf("push %d: %v %v", p.i, err, errs)
	}
	p.prev = tip
	p.n.Maintain(p.owner, p.repoNm)
}

func newPusher(t *testing.T, n *Node, d repo.Deps, owner, name string) *pusher {
	if err := repo.Create(context.Background(), d, owner, name); err != nil {
		t.Fatal(err)
	}
	p := &pusher{t: t, n: n, d: d, dir: t.TempDir(), owner: owner, repoNm: name}
	p.git(nil, "init", "-q", "-b", "main")
	return p
}

func packsOf(t *testing.T, n *Node, owner, name string) []repo.PackInfo {
	t.Helper()
	s, err := n.Session(context.Background(), owner, name)
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
	n, d := newTestNode(t, memstore.New(), time.Minute, 8)
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
}

// TestCloneDuringRollUp: a clone that took its snapshot before a roll-up
// switched the pack list still writes a complete pack, and so does one
// after it.
func TestCloneDuringRollUp(t *testing.T) {
	n, d := newTestNode(t, memstore.New(), time.Minute, 8)
	p := newPusher(t, n, d, "alice", "clone")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One at a time, so the packs are 6 and 3 objects (3 per push)...
	for range 3 {
		p.push()
		if err := n.WaitMaintenance(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// ...and the next push makes the roll-up take every pack; a clone
	// starts just before it is built.
	var during *Session
	n.testBeforeRollUp = func(owner, name string) {
		var err error
		if during, err = n.Session(ctx, owner, name); err != nil {
			t.Error(err)
		}
	}
	p.push()
	if err := n.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
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
	s2, err := n.Session(ctx, "alice", "clone")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	for _, s := range []*Session{during, s2} {
		var buf bytes.Buffer
		if _, err := s.Snapshot.Objects().WritePack(ctx, &buf, want, pack.WriteOptions{OfsDelta: true}); err != nil {
			t.Fatal(err)
		}
		check := &pusher{t: t, dir: t.TempDir()}
		check.git(nil, "init", "-q")
		check.git(buf.Bytes(), "index-pack", "--stdin", "--strict")
	}
}
