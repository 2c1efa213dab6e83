package fetchpack

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// TestURIFetch: a fetch without shallow state, deepening or filter, from
// a client that accepts http or https, may get packs by URI.
func TestURIFetch(t *testing.T) {
	id := object.MustID("0123456789012345678901234567890123456789")
	clone := func(f func(*gitproto.FetchRequest)) *gitproto.FetchRequest {
		r := &gitproto.FetchRequest{Wants: []object.ID{id}, PackURIProtocols: []string{"https"}}
		if f != nil {
			f(r)
		}
		return r
	}
	cases := []struct {
		name string
		req  *gitproto.FetchRequest
		want bool
	}{
		{"https", clone(nil), true},
		{"http", clone(func(r *gitproto.FetchRequest) { r.PackURIProtocols = []string{"ftp", "http"} }), true},
		{"no schemes", clone(func(r *gitproto.FetchRequest) { r.PackURIProtocols = nil }), false},
		{"other schemes", clone(func(r *gitproto.FetchRequest) { r.PackURIProtocols = []string{"ftp", "file"} }), false},
		{"haves", clone(func(r *gitproto.FetchRequest) { r.Haves = []object.ID{id} }), true},
		{"shallow client", clone(func(r *gitproto.FetchRequest) { r.ClientShallow = []object.ID{id} }), false},
		{"depth", clone(func(r *gitproto.FetchRequest) { r.Depth = 1 }), false},
		{"deepen-since", clone(func(r *gitproto.FetchRequest) { r.DeepenSince = 1 }), false},
		{"filter", clone(func(r *gitproto.FetchRequest) { r.Filter = "blob:none" }), false},
		{"include-tag", clone(func(r *gitproto.FetchRequest) { r.IncludeTag = true }), true},
		{"deepen", clone(func(r *gitproto.FetchRequest) { r.Haves = []object.ID{id}; r.DeepenNot = []object.ID{id} }), false},
	}
	for _, c := range cases {
		if got := URIFetch(c.req); got != c.want {
			t.Errorf("%s: URIFetch = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestChooseURIPacks: which stored packs a fetch is sent by URI. A pack
// pays when the fetch sends at least 90% of its bytes anyway and those
// reach the minimum (a full clone's base is exempt from the minimum); of
// those, only packs holding nothing unreachable are offered. The reason
// for none is unreachable when a needed pack holds unreachable objects.
func TestChooseURIPacks(t *testing.T) {
	const min = 1 << 20
	pays := func(size, need int64) URICandidate { return URICandidate{Size: size, Need: need, Reachable: true} }
	cases := []struct {
		name  string
		cands []URICandidate
		want  []int
		why   string
	}{
		{"none", nil, nil, URINotWorth},
		{"large and all needed", []URICandidate{pays(50<<20, 50<<20)}, []int{0}, ""},
		{"exactly 90% needed", []URICandidate{pays(10<<20, 9<<20)}, []int{0}, ""},
		{"under 90% needed: the client has or skips too much of it", []URICandidate{pays(10<<20, 9<<20-1)}, nil, URINotWorth},
		{"needed bytes under the minimum", []URICandidate{pays(min-1, min-1)}, nil, URINotWorth},
		{"needed bytes at the minimum", []URICandidate{pays(min, min)}, []int{0}, ""},
		{"small base of a full clone", []URICandidate{{Size: 5000, Need: 4968, Base: true, Reachable: true}}, []int{0}, ""},
		{"base mostly not needed (single branch of many)", []URICandidate{{Size: 5000, Need: 1000, Base: true, Reachable: true}}, nil, URINotWorth},
		{"nothing needed", []URICandidate{{Size: 5000, Base: true, Reachable: true}}, nil, URINotWorth},
		{"pays but holds an unreachable object", []URICandidate{{Size: 50 << 20, Need: 50 << 20}}, nil, URIUnreachable},
		{"unreachable, and mostly not needed (a deleted branch's objects)", []URICandidate{{Size: 50 << 20, Need: 1 << 20}}, nil, URIUnreachable},
		{"unreachable but not needed at all (the base a fetch has)", []URICandidate{{Size: 50 << 20}, pays(1<<20, 1<<19)}, nil, URINotWorth},
		{
			"fetch after pushes: the base the client has stays out, the large push goes, small ones inline",
			[]URICandidate{pays(80<<20, 0), pays(30<<20, 29<<20), pays(200<<10, 200<<10), pays(5<<20, 3<<20)},
			[]int{1}, "",
		},
		{
			"clone: base and a large push on top; an unreachable pack is skipped, not the others",
			[]URICandidate{{Size: 80 << 20, Need: 80 << 20, Base: true, Reachable: true}, {Size: 40 << 20, Need: 40 << 20}, pays(2<<20, 2<<20)},
			[]int{0, 2}, "",
		},
	}
	for _, c := range cases {
		got, why := ChooseURIPacks(c.cands, min)
		if !slices.Equal(got, c.want) || why != c.why {
			t.Errorf("%s: chose %v (%q), want %v (%q)", c.name, got, why, c.want, c.why)
		}
	}
}

// TestURICandidates: what a clone and a fetch need of the stored packs,
// in bytes: a clone all of the base, a fetch the bytes of the objects it
// is sent (counted from its object list, which is shorter than the pack,
// and checked against a scan of the whole pack); an object two packs hold
// counts for the larger only; packs under the minimum are not candidates
// unless they are a clone's base.
func TestURICandidates(t *testing.T) {
	dir, p, bmPath := bitmapRepo(t)
	bm := OpenBitmap(bmPath, p, nil)
	rev := func(r string) object.ID { return object.MustID(sh(t, dir, "git rev-parse "+r)) }
	// A second pack holding what the fetch below is sent.
	sub := sh(t, dir, "git rev-list --objects main~2..main | git pack-objects -q .git/objects/pack/sub")
	p2, err := pack.Open(filepath.Join(dir, ".git/objects/pack/sub-"+sub+".pack"), filepath.Join(dir, ".git/objects/pack/sub-"+sub+".idx"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p2.Close() })
	set := pack.NewSet(p2, p)
	ctx := context.Background()
	plan := func(req gitproto.FetchRequest) *walk.Result {
		res, err := PlanWith(ctx, walk.NewGraph(set, 0), bm, nil, &req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	clone := plan(gitproto.FetchRequest{Wants: []object.ID{rev("main"), rev("topic"), rev("v1")}})
	packs, cands, err := URICandidates(set, bm, clone, true, 1<<20)
	if err != nil || len(packs) != 1 || packs[0] != p || cands[0] != (URICandidate{Size: p.Size(), Need: p.Size() - 32, Base: true}) {
		t.Fatalf("clone: %v %+v %v", packs, cands, err)
	}

	fetch := plan(gitproto.FetchRequest{Wants: []object.ID{rev("main")}, Haves: []object.ID{rev("main~2")}})
	if fetch.Len() == 0 || fetch.Len() >= p.Index().Count() {
		t.Fatalf("the fetch sends %d objects of %d", fetch.Len(), p.Index().Count())
	}
	sizes, err := p.EntrySizes()
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for id, n := range sizes {
		if fetch.Has(id) {
			want += n
		}
	}
	packs, cands, err = URICandidates(set, bm, fetch, false, 0)
	if err != nil || len(packs) != 2 || packs[0] != p || packs[1] != p2 {
		t.Fatalf("fetch: %v %v", packs, err)
	}
	if cands[0] != (URICandidate{Size: p.Size(), Need: want}) || cands[1] != (URICandidate{Size: p2.Size()}) {
		t.Fatalf("fetch: %+v, want %d bytes needed of the large pack, none of the other", cands, want)
	}
	if packs, _, _ := URICandidates(set, bm, fetch, false, p.Size()+1); len(packs) != 0 {
		t.Fatalf("packs under the minimum are candidates: %v", packs)
	}
}
