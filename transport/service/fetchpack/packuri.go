package fetchpack

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// URISchemes are the URI schemes of the packs a client may be sent
// (what a presigned store URL is).
var URISchemes = []string{"https", "http"}

// URIFetch reports whether req may be answered with packs the client
// downloads whole (protocol v2 packfile-uris): the client accepts an
// http(s) URI, and the request has no shallow state or deepening and no
// filter (the client wants less than whole packs; those keep the usual
// answer). Haves and include-tag are fine: the objects to send are
// computed as usual, the packs are chosen among them (URICandidates) and
// the inline pack carries the rest.
func URIFetch(req *gitproto.FetchRequest) bool {
	if len(req.ClientShallow) > 0 || req.Deepen() || req.Filter != "" {
		return false
	}
	return slices.ContainsFunc(req.PackURIProtocols, func(p string) bool { return slices.Contains(URISchemes, p) })
}

// URICandidate is what a fetch would take of one stored pack, for
// ChooseURIPacks.
type URICandidate struct {
	// Size is the pack's bytes: what the client downloads.
	Size int64
	// Need is the bytes of the pack's objects that the fetch sends anyway
	// (and no earlier candidate holds): what the node saves. The rest of
	// the pack is objects the client already has or did not ask for.
	Need int64
	// Base marks the largest bitmapped pack on a full clone: the history's
	// base, offered whatever its size.
	Base bool
	// Reachable: every object in the pack is reachable from the refs now
	// (bitmap.Reach.HoldsAll), so git could send each of them.
	Reachable bool
}

// uriMinShare is the share of a URI pack's bytes (in tenths) that the
// fetch must send anyway: a stored pack is sent whole, so up to a tenth
// of it may be objects the client already has (the bases a pushed thin
// pack was completed with) or did not ask for. The inline pack never
// holds either.
const uriMinShare = 9

// Pays reports whether sending the pack by URI is worth it: the fetch
// sends at least 90% of its bytes anyway, and those bytes reach minBytes
// (below it the client's extra download costs more than the node saves)
// unless the pack is a full clone's base. Reachability is not part of it.
func (c URICandidate) Pays(minBytes int64) bool {
	if c.Need <= 0 || c.Need*10 < c.Size*uriMinShare {
		return false
	}
	return c.Base || c.Need >= minBytes
}

// Why a fetch that accepts pack URIs got none (ChooseURIPacks).
const (
	// URINotWorth: no stored pack pays (Pays).
	URINotWorth = "not_worth"
	// URIUnreachable: a pack the fetch needs objects of holds objects the
	// refs no longer reach; it waits for maintenance to rewrite it.
	URIUnreachable = "unreachable"
)

// ChooseURIPacks returns the indexes of the candidates to send by URI:
// those that hold nothing unreachable, since a client must receive
// nothing that git could not send it, and pay. When it returns none, why
// says why: URIUnreachable when a pack the fetch needs objects of holds
// unreachable ones (maintenance will rewrite it), else URINotWorth.
func ChooseURIPacks(cands []URICandidate, minBytes int64) (chosen []int, why string) {
	why = URINotWorth
	for i, c := range cands {
		switch {
		case !c.Reachable && c.Need > 0:
			why = URIUnreachable
		case c.Reachable && c.Pays(minBytes):
			chosen = append(chosen, i)
		}
	}
	if len(chosen) > 0 {
		why = ""
	}
	return chosen, why
}

// URICandidates lists the stored packs (set's) that may pay for res,
// largest first, with what res needs of each: packs of at least minBytes,
// and on a full clone (fullClone) the largest pack with a bitmap of its
// own in s, the base. An object res sends counts for the first (largest)
// candidate holding it, so two packs are never both paid for by one
// object. Reachable is left false: the caller asks the reachability of
// the packs the fetch needs objects of only.
func URICandidates(set *pack.Set, s *bitmap.Stack, res *walk.Result, fullClone bool, minBytes int64) ([]*pack.Pack, []URICandidate, error) {
	var base *pack.Pack
	if fullClone && s != nil {
		layers := s.Layers()
		for i, p := range s.Packs() {
			if layers[i] != nil && (base == nil || p.Size() > base.Size()) {
				base = p
			}
		}
	}
	var packs []*pack.Pack
	for _, p := range set.Packs() {
		if p == base || p.Size() >= minBytes {
			packs = append(packs, p)
		}
	}
	slices.SortStableFunc(packs, func(a, b *pack.Pack) int { return cmp.Compare(b.Size(), a.Size()) })
	cands := make([]URICandidate, len(packs))
	for i, p := range packs {
		need, err := uriNeed(p, packs[:i], res)
		if err != nil {
			return nil, nil, fmt.Errorf("pack URI candidate %s: %w", p.Name(), err)
		}
		cands[i] = URICandidate{Size: p.Size(), Need: need, Base: p == base}
	}
	return packs, cands, nil
}

// uriNeed returns the bytes of p's objects that res sends and no pack of
// earlier holds. It reads whichever is shorter, res's objects or p's
// index: a small fetch does not scan a large base pack.
func uriNeed(p *pack.Pack, earlier []*pack.Pack, res *walk.Result) (int64, error) {
	counts := func(id object.ID) bool {
		return !slices.ContainsFunc(earlier, func(q *pack.Pack) bool { return q.Has(id) })
	}
	var need int64
	if res.Len() < p.Index().Count() {
		for _, id := range res.Objects {
			n, ok, err := p.EntrySize(id)
			if err != nil {
				return 0, err
			}
			if ok && counts(id) {
				need += n
			}
		}
		return need, nil
	}
	sizes, err := p.EntrySizes()
	if err != nil {
		return 0, err
	}
	for id, n := range sizes {
		if res.Has(id) && counts(id) {
			need += n
		}
	}
	return need, nil
}

// Omit returns res without the objects of packs, which the client
// downloads whole: what the inline pack beside them must hold. The pack
// written for it is self-contained (no delta against their objects): the
// client indexes it before the downloads.
func Omit(res *walk.Result, packs []*pack.Pack) *walk.Result {
	in := func(id object.ID) bool {
		return slices.ContainsFunc(packs, func(p *pack.Pack) bool { return p.Has(id) })
	}
	objs := make([]object.ID, 0, len(res.Objects)/4)
	commits := 0
	for i, id := range res.Objects {
		if in(id) {
			continue
		}
		if i < res.Commits {
			commits++
		}
		objs = append(objs, id)
	}
	has := func(id object.ID) bool { return res.Has(id) && !in(id) }
	return walk.NewResult(objs, commits, has, res.ClientHas)
}
