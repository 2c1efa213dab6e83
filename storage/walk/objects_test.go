package walk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// fixture builds a small history with branches, a merge, renames,
// deletions, a re-added old blob and annotated tags (one a tag of a tag,
// one on a tree, one on a blob).
//
//	old:      c1 - o1 - o2
//	main:     c1 - c2 - c3 - c4 - M - c5 - c6
//	feature:        \- f1 - f2 ----/
func fixture(t testing.TB) *testRepo {
	r := newTestRepo(t)
	r.write("a.txt", "alpha\n")
	r.write("dir/b.txt", "bravo\n")
	r.write("dir/sub/c.txt", "charlie\n")
	r.write("big.bin", strings.Repeat("0123456789abcdef", 512)) // 8 KiB
	r.commit("c1")
	r.git("branch", "old")
	r.write("a.txt", "alpha 2\n")
	r.write("dir/d.txt", "delta\n")
	r.commit("c2")
	r.git("tag", "-a", "-m", "v1", "v1")
	r.git("tag", "-a", "-m", "signed v1", "v1-outer", "v1")
	r.git("tag", "-a", "-m", "tree tag", "treetag", "HEAD^{tree}")
	r.git("tag", "-a", "-m", "blob tag", "blobtag", "HEAD:a.txt")
	r.git("checkout", "-q", "-b", "feature")
	r.git("mv", "dir/b.txt", "dir/b2.txt")
	r.commit("f1")
	r.write("feat/x.txt", "x\n")
	r.write("feat/deep/y.txt", "y\n")
	r.write("feat/deep/deeper/z.txt", "z\n")
	r.commit("f2")
	r.git("checkout", "-q", "main")
	r.git("rm", "-q", "-r", "dir/sub")
	r.commit("c3")
	r.git("tag", "lightweight")
	r.write("big.bin", strings.Repeat("fedcba9876543210", 64)) // 1 KiB
	r.write("dir/d.txt", "delta 2\n")
	r.commit("c4")
	r.git("merge", "-q", "--no-ff", "-m", "M", "feature")
	r.now += 60
	r.write("a.txt", "alpha\n") // back to c1's blob
	r.commit("c5")
	r.git("tag", "-a", "-m", "v2", "v2")
	r.write("feat/deep/y.txt", "y 2\n")
	r.commit("c6")
	r.git("checkout", "-q", "old")
	r.write("old.txt", "old 1\n")
	r.commit("o1")
	r.write("dir/sub/c.txt", "charlie old\n")
	r.commit("o2")
	r.git("checkout", "-q", "main")
	return r
}

// tagRefs lists the fixture's annotated tags for include-tag.
func tagRefs(r *testRepo) []TagRef {
	var refs []TagRef
	for _, line := range strings.Split(r.git("for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", "refs/tags"), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == "tag" {
			refs = append(refs, TagRef{Tag: object.MustID(f[0]), Peeled: r.rev(f[2] + "^{}")})
		}
	}
	return refs
}

func TestObjectsMatchesRevList(t *testing.T) {
	r := fixture(t)
	g := NewGraph(r.reader(), 0)
	cases := []struct {
		name         string
		wants, haves []string
		filter       string
	}{
		{name: "clone main", wants: []string{"main"}},
		{name: "clone all", wants: []string{"main", "old", "feature"}},
		{name: "incremental", wants: []string{"main"}, haves: []string{"main~2"}},
		{name: "have merged branch", wants: []string{"main"}, haves: []string{"feature"}},
		{name: "unrelated have", wants: []string{"main"}, haves: []string{"old"}},
		{name: "two wants two haves", wants: []string{"main", "old"}, haves: []string{"feature~1", "main~3"}},
		{name: "up to date", wants: []string{"main"}, haves: []string{"main"}},
		{name: "have is descendant", wants: []string{"main~3"}, haves: []string{"main"}},
		{name: "tag of tag", wants: []string{"v1-outer"}},
		{name: "tag with have", wants: []string{"v2"}, haves: []string{"v1"}},
		{name: "tree want", wants: []string{"main^{tree}"}, haves: []string{"main~1"}},
		{name: "tree and blob tags", wants: []string{"treetag", "blobtag"}},
		{name: "have unknown to server", wants: []string{"main"}, haves: []string{"0123456789012345678901234567890123456789"}},
		{name: "blob:none", wants: []string{"main"}, filter: "blob:none"},
		{name: "blob:none incremental", wants: []string{"main", "old"}, haves: []string{"main~2"}, filter: "blob:none"},
		{name: "blob:limit", wants: []string{"main", "old"}, filter: "blob:limit=1k"},
		{name: "blob:limit exact", wants: []string{"main"}, filter: "blob:limit=1024"},
		{name: "blob:limit 0", wants: []string{"main"}, filter: "blob:limit=0"},
		{name: "tree:0", wants: []string{"main", "v1-outer"}, filter: "tree:0"},
		{name: "tree:1", wants: []string{"main"}, filter: "tree:1"},
		{name: "tree:2", wants: []string{"main", "old"}, haves: []string{"main~1"}, filter: "tree:2"},
		{name: "tree:3", wants: []string{"main"}, filter: "tree:3"},
		{name: "tree:2 tree want", wants: []string{"treetag"}, filter: "tree:2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{}
			var args []string
			if tc.filter != "" {
				f, err := ParseFilter(tc.filter)
				if err != nil {
					t.Fatal(err)
				}
				req.Filter = f
				args = append(args, "--filter="+tc.filter)
			}
			for _, w := range tc.wants {
				req.Wants = append(req.Wants, r.rev(w))
				args = append(args, w)
			}
			for _, h := range tc.haves {
				if id, err := object.ParseID(h); err == nil {
					req.Haves = append(req.Haves, id)
					continue
				}
				req.Haves = append(req.Haves, r.rev(h))
				args = append(args, "^"+h)
			}
			res, err := Objects(context.Background(), g, req)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d objects", len(res.Objects))
			if err := sameSet(res.Objects, r.revList(args...)); err != nil {
				t.Fatal(err)
			}
			for _, id := range res.Objects {
				if !res.Has(id) {
					t.Fatalf("Has(%s) = false for a listed object", id)
				}
			}
			checkOrder(t, g, res)
		})
	}
}

// checkOrder asserts that Objects starts with its Commits commits in
// non-increasing committer time.
func checkOrder(t *testing.T, g *Graph, res *Result) {
	t.Helper()
	last := int64(1<<63 - 1)
	for i, id := range res.Objects {
		typ, _, err := g.Reader().ReadObject(id)
		if err != nil {
			t.Fatal(err)
		}
		if (i < res.Commits) != (typ == object.Commit) {
			t.Fatalf("object %d (%s) is a %s; Commits = %d", i, id, typ, res.Commits)
		}
		if typ == object.Commit {
			c, _ := g.Commit(id)
			if c.Time > last {
				t.Fatalf("commit %s out of date order", id)
			}
			last = c.Time
		}
	}
}

func TestObjectsMatchesUploadPack(t *testing.T) {
	r := fixture(t)
	g := NewGraph(r.reader(), 0)
	tags := tagRefs(r)
	cases := []struct {
		name string
		up   uploadReq
		req  Request
	}{
		{name: "clone with include-tag",
			up:  uploadReq{wants: r.revs("main"), includeTag: true},
			req: Request{Wants: r.revs("main"), IncludeTags: tags}},
		{name: "fetch with include-tag",
			up:  uploadReq{wants: r.revs("main", "old"), haves: r.revs("main~3"), includeTag: true},
			req: Request{Wants: r.revs("main", "old"), Haves: r.revs("main~3"), IncludeTags: tags}},
		{name: "depth 1",
			up:  uploadReq{wants: r.revs("main"), depth: 1},
			req: Request{Wants: r.revs("main"), Depth: 1}},
		{name: "depth 3 through merge",
			up:  uploadReq{wants: r.revs("main"), depth: 3},
			req: Request{Wants: r.revs("main"), Depth: 3}},
		{name: "depth 3 two wants",
			up:  uploadReq{wants: r.revs("main", "old"), depth: 3},
			req: Request{Wants: r.revs("main", "old"), Depth: 3}},
		{name: "depth with tag include",
			up:  uploadReq{wants: r.revs("main"), depth: 4, includeTag: true},
			req: Request{Wants: r.revs("main"), Depth: 4, IncludeTags: tags}},
		{name: "deepen from shallow",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main"), shallow: r.revs("main~1"), depth: 4},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main"), ClientShallow: r.revs("main~1"), Depth: 4}},
		{name: "deepen relative",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main"), shallow: r.revs("main~1"), depth: 2, relative: true},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main"), ClientShallow: r.revs("main~1"), Depth: 2, DeepenRelative: true}},
		{name: "unshallow",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main", "main~1"), shallow: r.revs("main~2"), depth: InfiniteDepth},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main", "main~1"), ClientShallow: r.revs("main~2"), Depth: InfiniteDepth}},
		{name: "shallow client fetches new commits",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main~2"), shallow: r.revs("main~2")},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main~2"), ClientShallow: r.revs("main~2")}},
		{name: "shallow client, boundary below merge",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main~3"), shallow: r.revs("main~3", "feature")},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main~3"), ClientShallow: r.revs("main~3", "feature")}},
		{name: "deepen-since",
			up:  uploadReq{wants: r.revs("main"), since: r.commitTime("main~3")},
			req: Request{Wants: r.revs("main"), DeepenSince: r.commitTime("main~3")}},
		{name: "deepen-not",
			up:  uploadReq{wants: r.revs("main"), deepenNot: []string{"refs/tags/lightweight"}},
			req: Request{Wants: r.revs("main"), DeepenNot: r.revs("lightweight")}},
		{name: "deepen-not and since with shallow client",
			up:  uploadReq{wants: r.revs("main"), haves: r.revs("main"), shallow: r.revs("main~1"), deepenNot: []string{"refs/heads/old"}, since: r.commitTime("main~4")},
			req: Request{Wants: r.revs("main"), Haves: r.revs("main"), ClientShallow: r.revs("main~1"), DeepenNot: r.revs("old"), DeepenSince: r.commitTime("main~4")}},
		{name: "depth with filter",
			up:  uploadReq{wants: r.revs("main"), depth: 2, filter: "blob:none"},
			req: Request{Wants: r.revs("main"), Depth: 2, Filter: Filter{Kind: FilterBlobNone}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := r.uploadPack(tc.up)
			res, err := Objects(context.Background(), g, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d objects, %d shallow, %d unshallow", len(want.objects), len(want.shallow), len(want.unshallow))
			if err := sameSet(res.Objects, want.objects); err != nil {
				t.Errorf("objects: %v", err)
			}
			if err := sameSet(res.Shallow, want.shallow); err != nil {
				t.Errorf("shallow: %v", err)
			}
			if err := sameSet(res.Unshallow, want.unshallow); err != nil {
				t.Errorf("unshallow: %v", err)
			}
		})
	}
}

func (r *testRepo) commitTime(rev string) int64 {
	r.tb.Helper()
	c := r.git("show", "-s", "--format=%ct", rev)
	var n int64
	for _, ch := range c {
		n = n*10 + int64(ch-'0')
	}
	return n
}

func TestObjectsErrors(t *testing.T) {
	r := fixture(t)
	g := NewGraph(r.reader(), 0)
	ctx := context.Background()
	missing := object.MustID("0123456789012345678901234567890123456789")

	if _, err := Objects(ctx, g, Request{Wants: []object.ID{missing}}); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("missing want: err = %v, want ErrNotFound", err)
	}
	if _, err := Objects(ctx, g, Request{Wants: r.revs("main"), Depth: 1, DeepenSince: 5}); !errors.Is(err, ErrDeepenConflict) {
		t.Errorf("depth+since: err = %v, want ErrDeepenConflict", err)
	}
	if _, err := Objects(ctx, g, Request{Wants: r.revs("main"), DeepenSince: r.now + 1000}); !errors.Is(err, ErrNoShallowCommits) {
		t.Errorf("since in the future: err = %v, want ErrNoShallowCommits", err)
	}
	if _, err := Objects(ctx, g, Request{Wants: r.revs("main"), ClientShallow: r.revs("main^{tree}")}); !errors.Is(err, ErrNotCommit) {
		t.Errorf("tree as shallow: err = %v, want ErrNotCommit", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Objects(cancelled, g, Request{Wants: r.revs("main")}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}
