package fetchpack

import (
	"slices"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/gitproto"
)

// URISchemes are the URI schemes of the packs a client may be sent
// (what a presigned store URL is).
var URISchemes = []string{"https", "http"}

// URIClone reports whether req may be answered with a pack the client
// downloads whole (protocol v2 packfile-uris): the client accepts an
// http(s) URI, and the request is a full clone (no haves, no shallow
// state or deepening), without a filter (the client wants less than whole
// packs) or include-tag (those keep the usual answer).
func URIClone(req *gitproto.FetchRequest) bool {
	if !Cacheable(req) || req.Filter != "" || req.IncludeTag {
		return false
	}
	return slices.ContainsFunc(req.PackURIProtocols, func(p string) bool { return slices.Contains(URISchemes, p) })
}

// URIPack picks the pack a clone may download whole: the largest pack of
// the bitmap stack s that has a bitmap of its own, provided every object
// in it is reachable from the refs (reach), since a client must receive
// nothing that git could not send it. nil when there is none: a pack
// that still holds objects of deleted refs waits for maintenance to
// rewrite it.
func URIPack(s *bitmap.Stack, reach *bitmap.Reach) *pack.Pack {
	if s == nil || reach == nil {
		return nil
	}
	var best *pack.Pack
	layers := s.Layers()
	for i, p := range s.Packs() {
		if layers[i] != nil && (best == nil || p.Size() > best.Size()) {
			best = p
		}
	}
	if best == nil || !reach.HoldsAll(best) {
		return nil
	}
	return best
}

// Omit returns res without the objects of p, which the client downloads
// whole: what the inline pack beside it must hold. The pack written for
// it is self-contained (no delta against p's objects): the client
// indexes it before the download.
func Omit(res *walk.Result, p *pack.Pack) *walk.Result {
	objs := make([]object.ID, 0, len(res.Objects)/4)
	commits := 0
	for i, id := range res.Objects {
		if p.Has(id) {
			continue
		}
		if i < res.Commits {
			commits++
		}
		objs = append(objs, id)
	}
	has := func(id object.ID) bool { return res.Has(id) && !p.Has(id) }
	return walk.NewResult(objs, commits, has, res.ClientHas)
}
