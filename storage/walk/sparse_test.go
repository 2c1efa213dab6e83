package walk

import (
	"context"
	"slices"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// TestSparseMatchesUploadPack compares the sparse walk with git's own
// upload-pack, which uses the sparse algorithm by default (pack.useSparse),
// on a history where the two algorithms differ: a file moved into a new
// directory (its old directory deleted) is sent again by the sparse walk,
// not by the full one.
func TestSparseMatchesUploadPack(t *testing.T) {
	r := newTestRepo(t)
	r.write("a/f.txt", "shared content\n")
	r.write("a/g.txt", "g\n")
	r.write("keep/deep/k.txt", "k\n")
	r.commit("c1")
	r.write("b/h.txt", "h\n")
	r.git("mv", "a/f.txt", "b/f.txt")
	r.git("rm", "-q", "a/g.txt")
	r.commit("c2")
	r.write("keep/deep/k.txt", "k2\n")
	r.commit("c3")
	moved := r.rev("HEAD:b/f.txt")

	g := NewGraph(r.reader(), 0)
	cases := []struct {
		name         string
		wants, haves []string
	}{
		{"moved file", []string{"main"}, []string{"main~2"}},
		{"deep change", []string{"main"}, []string{"main~1"}},
		{"up to date", []string{"main"}, []string{"main"}},
		{"clone", []string{"main"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Wants: r.revs(tc.wants...), Haves: r.revs(tc.haves...), Sparse: true}
			want := r.uploadPack(uploadReq{wants: req.Wants, haves: req.Haves})
			res, err := Objects(context.Background(), g, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameSet(res.Objects, want.objects); err != nil {
				t.Fatalf("sparse vs upload-pack: %v", err)
			}
			// Sparse only ever sends more than the exact walk, never less,
			// and nothing outside the wants' closure.
			args := slices.Clone(tc.wants)
			for _, h := range tc.haves {
				args = append(args, "^"+h)
			}
			exact := r.revList(args...)
			all := r.revList(tc.wants...)
			for _, id := range exact {
				if !res.Has(id) {
					t.Fatalf("sparse result lacks %s that rev-list lists", id)
				}
			}
			for _, id := range res.Objects {
				if !slices.Contains(all, id) {
					t.Fatalf("sparse result has %s outside the wants' closure", id)
				}
			}
			if tc.name == "moved file" && !res.Has(moved) {
				t.Fatalf("sparse walk did not resend the moved blob %s; the case no longer tells the algorithms apart", moved)
			}
		})
	}
}

// TestSparseReadsFewerTrees checks the point of the sparse walk: an
// incremental fetch reads only the trees on changed paths, not the
// have side's whole tree.
func TestSparseReadsFewerTrees(t *testing.T) {
	r := newTestRepo(t)
	for _, d := range []string{"p", "q", "r", "s", "t", "u", "v", "w"} {
		for _, e := range []string{"1", "2", "3"} {
			r.write(d+"/"+e+"/file.txt", d+e+"\n")
		}
	}
	r.commit("base")
	r.write("p/1/file.txt", "changed\n")
	r.commit("edit")
	mr := r.reader()
	count := func(sparse bool) (int64, []object.ID) {
		g := NewGraph(mr, 0)
		req := Request{Wants: r.revs("main"), Haves: r.revs("main~1"), Sparse: sparse}
		if _, err := g.Commit(req.Wants[0]); err != nil { // warm the commit cache
			t.Fatal(err)
		}
		before := mr.reads.Load()
		res, err := Objects(context.Background(), g, req)
		if err != nil {
			t.Fatal(err)
		}
		return mr.reads.Load() - before, res.Objects
	}
	fullReads, fullObjs := count(false)
	sparseReads, sparseObjs := count(true)
	if err := sameSet(sparseObjs, fullObjs); err != nil {
		t.Fatalf("a plain edit must give the same objects: %v", err)
	}
	// The full walk reads all 33 trees of the have side; sparse reads the
	// root, p and p/1 trees of each side.
	if 3*sparseReads > fullReads {
		t.Fatalf("sparse walk read %d objects, full walk %d", sparseReads, fullReads)
	}
	t.Logf("reads: full %d, sparse %d", fullReads, sparseReads)
}
