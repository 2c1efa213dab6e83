package fetchpack

import (
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/gitproto"
)

// TestURIClone: only a full clone without filter or include-tag, from a
// client that accepts http or https, may get a pack by URI.
func TestURIClone(t *testing.T) {
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
		{"haves", clone(func(r *gitproto.FetchRequest) { r.Haves = []object.ID{id} }), false},
		{"shallow client", clone(func(r *gitproto.FetchRequest) { r.ClientShallow = []object.ID{id} }), false},
		{"depth", clone(func(r *gitproto.FetchRequest) { r.Depth = 1 }), false},
		{"deepen-since", clone(func(r *gitproto.FetchRequest) { r.DeepenSince = 1 }), false},
		{"filter", clone(func(r *gitproto.FetchRequest) { r.Filter = "blob:none" }), false},
		{"include-tag", clone(func(r *gitproto.FetchRequest) { r.IncludeTag = true }), false},
	}
	for _, c := range cases {
		if got := URIClone(c.req); got != c.want {
			t.Errorf("%s: URIClone = %v, want %v", c.name, got, c.want)
		}
	}
}
