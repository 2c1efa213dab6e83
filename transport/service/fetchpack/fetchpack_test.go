package fetchpack

import (
	"errors"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

var (
	idA = object.MustID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	idB = object.MustID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	idC = object.MustID("cccccccccccccccccccccccccccccccccccccccc")
)

func TestCacheable(t *testing.T) {
	cases := []struct {
		name string
		req  gitproto.FetchRequest
		want bool
	}{
		{"clone", gitproto.FetchRequest{Wants: []object.ID{idA}, Filter: "blob:none"}, true},
		{"fetch", gitproto.FetchRequest{Wants: []object.ID{idA}, Haves: []object.ID{idB}}, false},
		{"shallow client", gitproto.FetchRequest{Wants: []object.ID{idA}, ClientShallow: []object.ID{idB}}, false},
		{"depth", gitproto.FetchRequest{Wants: []object.ID{idA}, Depth: 1}, false},
		{"deepen-since", gitproto.FetchRequest{Wants: []object.ID{idA}, DeepenSince: 5}, false},
		{"deepen-not", gitproto.FetchRequest{Wants: []object.ID{idA}, DeepenNot: []object.ID{idB}}, false},
	}
	for _, tc := range cases {
		if got := Cacheable(&tc.req); got != tc.want {
			t.Errorf("%s: Cacheable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCacheKey(t *testing.T) {
	base := gitproto.FetchRequest{Wants: []object.ID{idA, idB}, OfsDelta: true}
	key := func(repo string, packs []string, req gitproto.FetchRequest) string {
		return CacheKey(repo, packs, &req)
	}
	k := key("o/r", []string{"p1", "p2"}, base)
	reordered := base
	reordered.Wants = []object.ID{idB, idA, idB}
	if key("o/r", []string{"p2", "p1"}, reordered) != k {
		t.Error("want and pack order (or a repeated want) changed the key")
	}
	tagged := base
	tagged.IncludeTag = true
	tagged.Snapshot.Refs = []gitproto.Ref{{Name: "refs/tags/v1", ID: idC, Peeled: idA}}
	moreTags := tagged
	moreTags.Snapshot.Refs = append([]gitproto.Ref{{Name: "refs/tags/v0", ID: idB, Peeled: idA}}, tagged.Snapshot.Refs...)
	variants := map[string]string{
		"repo":        key("o/other", []string{"p1", "p2"}, base),
		"pack list":   key("o/r", []string{"p1", "p2", "p3"}, base),
		"wants":       key("o/r", []string{"p1", "p2"}, gitproto.FetchRequest{Wants: []object.ID{idA}, OfsDelta: true}),
		"ofs-delta":   key("o/r", []string{"p1", "p2"}, gitproto.FetchRequest{Wants: base.Wants}),
		"filter":      key("o/r", []string{"p1", "p2"}, gitproto.FetchRequest{Wants: base.Wants, OfsDelta: true, Filter: "blob:none"}),
		"include-tag": key("o/r", []string{"p1", "p2"}, tagged),
		"tag set":     key("o/r", []string{"p1", "p2"}, moreTags),
	}
	seen := map[string]string{k: "base"}
	for name, v := range variants {
		if prev, ok := seen[v]; ok {
			t.Errorf("%s and %s share a key", name, prev)
		}
		seen[v] = name
	}
}

func TestWalkRequest(t *testing.T) {
	req := gitproto.FetchRequest{Wants: []object.ID{idA}, Filter: "blob:limit=1k", IncludeTag: true,
		Snapshot: gitproto.RefSnapshot{Refs: []gitproto.Ref{{ID: idB}, {ID: idC, Peeled: idA}}}}
	wr, err := WalkRequest(&req)
	if err != nil {
		t.Fatal(err)
	}
	if !wr.Sparse || wr.Filter.Kind != walk.FilterBlobLimit || wr.Filter.BlobLimit != 1024 {
		t.Fatalf("walk request = %+v", wr)
	}
	if len(wr.IncludeTags) != 1 || wr.IncludeTags[0] != (walk.TagRef{Tag: idC, Peeled: idA}) {
		t.Fatalf("include tags = %+v, want only the annotated tag", wr.IncludeTags)
	}
	req.Filter = "bogus"
	if _, err := WalkRequest(&req); !errors.Is(err, gitproto.ErrProtocol) {
		t.Fatalf("bad filter: err = %v, want ErrProtocol", err)
	}
}
