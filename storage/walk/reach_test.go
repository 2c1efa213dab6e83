package walk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func TestOkToGiveUp(t *testing.T) {
	r := fixture(t)
	g := NewGraph(r.reader(), 0)
	cases := []struct {
		name          string
		wants, common []string
		want          bool
	}{
		{"no common", []string{"main"}, nil, false},
		{"ancestor common", []string{"main"}, []string{"main~2"}, true},
		{"common is want", []string{"main"}, []string{"main"}, true},
		{"via merge parent", []string{"main"}, []string{"feature~1"}, true},
		{"one want unreached", []string{"main", "old"}, []string{"main~1"}, false},
		{"all wants reached", []string{"main", "old"}, []string{"main~1", "old~1"}, true},
		{"common newer than want", []string{"main~3"}, []string{"main"}, false},
		{"unrelated", []string{"old"}, []string{"feature"}, false},
		{"tag want peeled", []string{"v2"}, []string{"main~3"}, true},
		{"tree want ignored", []string{"main^{tree}"}, []string{"old"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var common []object.ID
			for _, c := range tc.common {
				common = append(common, r.rev(c))
			}
			if got := OkToGiveUp(context.Background(), g, r.revs(tc.wants...), common); got != tc.want {
				t.Fatalf("OkToGiveUp = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReachableFrom(t *testing.T) {
	r := fixture(t)
	g := NewGraph(r.reader(), 0)
	unknown := object.MustID("0123456789012345678901234567890123456789")
	cases := []struct {
		name          string
		tips, targets []string
		missing       []string
	}{
		{"targets are tips", []string{"main", "old"}, []string{"old", "main"}, nil},
		{"ancestors", []string{"main"}, []string{"main~3", "feature~1", "v1^{}"}, nil},
		{"other branch", []string{"main"}, []string{"old", "main~1"}, []string{"old"}},
		{"descendant", []string{"main~2"}, []string{"main"}, []string{"main"}},
		{"tag chain", []string{"v1-outer"}, []string{"v1", "v1^{}", "v2"}, []string{"v2"}},
		{"trees and blobs", []string{"main~1"}, []string{"main~3^{tree}", "main~2:dir/d.txt", "main:feat/deep/y.txt", "old:old.txt"}, []string{"main:feat/deep/y.txt", "old:old.txt"}},
		{"deleted file still reachable", []string{"main"}, []string{"main~5:dir/sub/c.txt"}, nil},
		{"unknown", []string{"main"}, []string{"unknown"}, []string{"unknown"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resolve := func(names []string) []object.ID {
				var ids []object.ID
				for _, n := range names {
					if n == "unknown" {
						ids = append(ids, unknown)
					} else {
						ids = append(ids, r.rev(n))
					}
				}
				return ids
			}
			got, err := ReachableFrom(context.Background(), g, resolve(tc.tips), resolve(tc.targets))
			if err != nil {
				t.Fatal(err)
			}
			if err := sameSet(got, resolve(tc.missing)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReachableFromTipsReadsNothing(t *testing.T) {
	r := fixture(t)
	mr := r.reader()
	g := NewGraph(mr, 0)
	tips := r.revs("main", "old", "v1")
	missing, err := ReachableFrom(context.Background(), g, tips, tips[:2])
	if err != nil || len(missing) != 0 {
		t.Fatalf("missing = %v, err = %v", missing, err)
	}
	if n := mr.reads.Load(); n != 0 {
		t.Fatalf("%d object reads for targets that are tips", n)
	}
}

func TestCheckConnected(t *testing.T) {
	r := fixture(t)
	// A new commit whose tree holds blobs written with hash-object; one of
	// them is then deleted, as if a pushed pack lacked it.
	out, err := r.run([]byte("present\n"), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	presentBlob := strings.TrimSpace(string(out))
	out, err = r.run([]byte("gone\n"), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	goneBlob := strings.TrimSpace(string(out))
	tree, err := r.run([]byte("100644 blob "+presentBlob+"\tp.txt\n100644 blob "+goneBlob+"\tz.txt\n"), "mktree")
	if err != nil {
		t.Fatal(err)
	}
	treeID := strings.TrimSpace(string(tree))
	newCommit := r.git("commit-tree", treeID, "-p", "main", "-m", "pushed")
	if err := os.Remove(filepath.Join(r.dir, ".git", "objects", goneBlob[:2], goneBlob[2:])); err != nil {
		t.Fatal(err)
	}
	mr := r.reader()
	ctx := context.Background()
	before := map[object.ID]bool{}
	for _, id := range r.revList("--all") {
		before[id] = true
	}
	known := func(id object.ID) bool { return before[id] }

	err = CheckConnected(ctx, mr, []object.ID{object.MustID(newCommit)}, known)
	if !errors.Is(err, ErrMissingObject) || !strings.Contains(err.Error(), "missing necessary objects: "+goneBlob) {
		t.Fatalf("err = %v, want missing %s", err, goneBlob)
	}
	// Without ReadHeader the blob is read in full; same answer.
	err = CheckConnected(ctx, plainReader{mr}, []object.ID{object.MustID(newCommit)}, known)
	if !errors.Is(err, ErrMissingObject) || !strings.Contains(err.Error(), goneBlob) {
		t.Fatalf("plain reader: err = %v", err)
	}
	// Existing history is complete: fine whether or not it is known.
	if err := CheckConnected(ctx, mr, r.revs("main", "old", "v1-outer", "treetag"), func(object.ID) bool { return false }); err != nil {
		t.Fatalf("complete history: %v", err)
	}
	// A tip pointing at a missing commit.
	unknown := object.MustID("0123456789012345678901234567890123456789")
	if err := CheckConnected(ctx, mr, []object.ID{unknown}, known); !errors.Is(err, ErrMissingObject) {
		t.Fatalf("unknown tip: err = %v", err)
	}
	// Known objects are not descended: a known commit hides the gap.
	if err := CheckConnected(ctx, mr, []object.ID{object.MustID(newCommit)}, func(id object.ID) bool { return id == object.MustID(treeID) || before[id] }); err != nil {
		t.Fatalf("known tree: %v", err)
	}
	// Type mismatch: a tree id reached as a commit parent.
	body := "tree " + r.rev("main^{tree}").String() + "\nparent " + r.rev("main^{tree}").String() + "\nauthor A <a@x> 1 +0000\ncommitter C <c@x> 1 +0000\n\nbad\n"
	out, err = r.run([]byte(body), "hash-object", "-t", "commit", "-w", "--literally", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	bad := object.MustID(strings.TrimSpace(string(out)))
	if err := CheckConnected(ctx, r.reader(), []object.ID{bad}, known); err == nil || !strings.Contains(err.Error(), "expected commit, got tree") {
		t.Fatalf("tree as parent: err = %v", err)
	}
}

// TestCheckConnectedCancelled: a walk longer than the context-check
// interval stops with the context's error, and the same walk completes
// when the context is live (so the error is the cancellation's).
func TestCheckConnectedCancelled(t *testing.T) {
	w := &edgeWorld{objs: map[object.ID]memObj{}}
	tree := w.put(object.Tree, treeEntry("100644", "a", w.put(object.Blob, "a")))
	var tip object.ID
	for i := range 2 * ctxCheckEvery {
		body := commitBody(tree) + fmt.Sprint(i)
		if i > 0 {
			body = commitBody(tree, tip) + fmt.Sprint(i)
		}
		tip = w.put(object.Commit, body)
	}
	r := &memReader{objs: w.objs}
	unknown := func(object.ID) bool { return false }
	if err := CheckConnected(context.Background(), r, []object.ID{tip}, unknown); err != nil {
		t.Fatalf("live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := CheckConnected(ctx, r, []object.ID{tip}, unknown); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: err = %v, want context.Canceled", err)
	}
}

func TestGraphCacheBoundedAndConcurrent(t *testing.T) {
	r := fixture(t)
	mr := r.reader()
	g := NewGraph(mr, 4)
	all := parseIDs(t, r.git("rev-list", "--all"))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				for _, id := range all {
					if _, err := g.Commit(id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	n := len(g.cur) + len(g.prev)
	g.mu.Unlock()
	if n > 4 {
		t.Fatalf("cache holds %d commits, bound 4", n)
	}
	if _, err := g.Commit(r.rev("main^{tree}")); !errors.Is(err, ErrNotCommit) {
		t.Fatalf("tree as commit: err = %v", err)
	}
	// A repeated walk over a warm, large-enough cache reads no commits.
	g2 := NewGraph(mr, 0)
	for _, id := range all {
		if _, err := g2.Commit(id); err != nil {
			t.Fatal(err)
		}
	}
	before := mr.reads.Load()
	for _, id := range all {
		g2.Commit(id)
	}
	if mr.reads.Load() != before {
		t.Fatal("warm cache still reads commits")
	}
}

func TestParseFilter(t *testing.T) {
	cases := []struct {
		spec string
		want Filter
		ok   bool
	}{
		{"blob:none", Filter{Kind: FilterBlobNone}, true},
		{"blob:limit=0", Filter{Kind: FilterBlobLimit}, true},
		{"blob:limit=123", Filter{Kind: FilterBlobLimit, BlobLimit: 123}, true},
		{"blob:limit=2k", Filter{Kind: FilterBlobLimit, BlobLimit: 2048}, true},
		{"blob:limit=3M", Filter{Kind: FilterBlobLimit, BlobLimit: 3 << 20}, true},
		{"blob:limit=1g", Filter{Kind: FilterBlobLimit, BlobLimit: 1 << 30}, true},
		{"tree:0", Filter{Kind: FilterTreeDepth}, true},
		{"tree:5", Filter{Kind: FilterTreeDepth, TreeDepth: 5}, true},
		{"blob:limit=", Filter{}, false},
		{"blob:limit=-1", Filter{}, false},
		{"blob:limit=1x", Filter{}, false},
		{"blob:limit=99999999999999999999g", Filter{}, false},
		{"tree:", Filter{}, false},
		{"tree:-1", Filter{}, false},
		{"sparse:oid=abc", Filter{}, false},
		{"combine:blob:none+tree:1", Filter{}, false},
		{"", Filter{}, false},
	}
	for _, tc := range cases {
		got, err := ParseFilter(tc.spec)
		if tc.ok != (err == nil) {
			t.Errorf("ParseFilter(%q) err = %v", tc.spec, err)
			continue
		}
		if !tc.ok {
			if !errors.Is(err, ErrUnsupportedFilter) {
				t.Errorf("ParseFilter(%q) err = %v, want ErrUnsupportedFilter", tc.spec, err)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("ParseFilter(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
		if again, err := ParseFilter(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q via %q: %+v, %v", tc.spec, got.String(), again, err)
		}
	}
}

func TestIDSet(t *testing.T) {
	s := newIDSet(0)
	ref := map[object.ID]bool{}
	var id object.ID
	for i := 1; i <= 5000; i++ {
		// Deterministic ids with colliding leading bytes to exercise probing.
		id[0], id[1], id[2], id[19] = byte(i%7), byte(i/7), byte(i>>8), byte(i)
		if s.Add(id) == ref[id] {
			t.Fatalf("Add(%s) disagrees with reference", id)
		}
		ref[id] = true
	}
	if !s.Add(object.ZeroID) || s.Add(object.ZeroID) || !s.Has(object.ZeroID) {
		t.Fatal("zero id membership")
	}
	if s.Len() != len(ref)+1 {
		t.Fatalf("Len = %d, want %d", s.Len(), len(ref)+1)
	}
	for k := range ref {
		if !s.Has(k) {
			t.Fatalf("lost %s", k)
		}
	}
	id[5] = 1
	if s.Has(id) {
		t.Fatal("Has of absent id")
	}
}
