package bitmap

import (
	"context"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/walk"
)

// maxTagChain bounds tag-of-tag chains, as the walk does.
const maxTagChain = 64

// ctxCheckEvery is how many objects a fill visits between context checks.
const ctxCheckEvery = 1024

// query is the state of one Objects call or one Build: positions for
// objects outside the stack, and the types the fills learned.
type query struct {
	ctx context.Context
	s   *Stack
	g   *walk.Graph
	r   object.Reader

	ext    map[object.ID]int // positions past s.span
	extIDs []object.ID
	types  [numTypes]bitset
	steps  int
	// strict (Build): every reached object must be in the stack.
	strict bool
}

func newQuery(ctx context.Context, s *Stack, g *walk.Graph) (*query, error) {
	types, err := s.types()
	if err != nil {
		return nil, err
	}
	return &query{ctx: ctx, s: s, g: g, r: g.Reader(), ext: make(map[object.ID]int), types: types}, nil
}

// errOutside is returned by a strict query that reaches an object outside
// the stack.
var errOutside = errors.New("object outside the pack")

// pos returns id's position: in the stack, or a new or known position past
// the stack's objects.
func (q *query) pos(id object.ID) (int, error) {
	if i, ok := q.s.find(id); ok {
		return i, nil
	}
	if q.strict {
		return 0, fmt.Errorf("%s: %w", id, errOutside)
	}
	if i, ok := q.ext[id]; ok {
		return i, nil
	}
	i := q.s.span + len(q.extIDs)
	q.ext[id] = i
	q.extIDs = append(q.extIDs, id)
	return i, nil
}

// lookup is pos without assigning: ok is false for an unknown object.
func (q *query) lookup(id object.ID) (int, bool) {
	if i, ok := q.s.find(id); ok {
		return i, true
	}
	i, ok := q.ext[id]
	return i, ok
}

func (q *query) id(pos int) object.ID {
	if pos < q.s.span {
		return q.s.id(pos)
	}
	return q.extIDs[pos-q.s.span]
}

func (q *query) mark(b *bitset, pos int, t object.Type) {
	b.set(pos)
	if s := typeSlot(t); s >= 0 {
		q.types[s].set(pos)
	}
}

func (q *query) tick() error {
	if q.steps++; q.steps%ctxCheckEvery == 0 {
		return q.ctx.Err()
	}
	return nil
}

// fill adds to b everything reachable from roots. Its invariant: when an
// object's bit is in b, so is everything it reaches (stored masks are
// closed, and the walk below only stops at set bits). Commits with a stored
// mask end the walk; the trees of the other commits are read after all
// masks are in, so unchanged subtrees are skipped by a bit test.
func (q *query) fill(b *bitset, roots []object.ID) error {
	var trees []object.ID // root trees of reached commits without a stored mask, and tree roots
	stack := make([]object.ID, 0, len(roots))
	// Roots may be of any type; parents are commits.
	for _, id := range roots {
		if err := q.root(b, id, &stack, &trees); err != nil {
			return err
		}
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		done, err := q.useStored(b, id)
		if err != nil || done {
			if err != nil {
				return err
			}
			continue
		}
		if err := q.tick(); err != nil {
			return err
		}
		c, err := q.g.Commit(id)
		if err != nil {
			return err
		}
		p, err := q.pos(id)
		if err != nil {
			return err
		}
		q.mark(b, p, object.Commit)
		trees = append(trees, c.Tree)
		for i := len(c.Parents) - 1; i >= 0; i-- {
			stack = append(stack, c.Parents[i])
		}
	}
	for _, t := range trees {
		if err := q.tree(b, t); err != nil {
			return err
		}
	}
	return nil
}

// useStored reports whether id is already in b or was added from its
// stored mask.
func (q *query) useStored(b *bitset, id object.ID) (bool, error) {
	if p, ok := q.lookup(id); ok && b.has(p) {
		return true, nil
	}
	m, ok, err := q.s.stored(id)
	if err != nil || !ok {
		return false, err
	}
	b.or(m)
	return true, nil
}

// root starts a fill at id: commits go on the commit stack, tags are
// followed, trees are queued and blobs marked.
func (q *query) root(b *bitset, id object.ID, stack, trees *[]object.ID) error {
	for range maxTagChain + 1 {
		done, err := q.useStored(b, id)
		if err != nil || done {
			return err
		}
		typ, data, err := q.r.ReadObject(id)
		if err != nil {
			return fmt.Errorf("read %s: %w", id, err)
		}
		switch typ {
		case object.Commit:
			*stack = append(*stack, id)
			return nil
		case object.Tree:
			*trees = append(*trees, id)
			return nil
		case object.Tag:
			t, err := object.ParseTag(data)
			if err != nil {
				return fmt.Errorf("parse tag %s: %w", id, err)
			}
			p, err := q.pos(id)
			if err != nil {
				return err
			}
			q.mark(b, p, object.Tag)
			id = t.Object
		default:
			p, err := q.pos(id)
			if err != nil {
				return err
			}
			q.mark(b, p, typ)
			return nil
		}
	}
	return fmt.Errorf("tag chain at %s longer than %d: %w", id, maxTagChain, object.ErrMalformed)
}

// tree adds tree id and everything under it, skipping subtrees already in
// b (whose contents are then in b too).
func (q *query) tree(b *bitset, id object.ID) error {
	p, err := q.pos(id)
	if err != nil {
		return err
	}
	if b.has(p) {
		return nil
	}
	if err := q.tick(); err != nil {
		return err
	}
	typ, data, err := q.r.ReadObject(id)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", id, err)
	}
	if typ != object.Tree {
		return fmt.Errorf("object %s: expected tree, got %s: %w", id, typ, object.ErrMalformed)
	}
	q.mark(b, p, object.Tree)
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		switch {
		case e.IsGitlink():
			// Submodule commits live in another repository.
		case e.IsTree():
			if err := q.tree(b, e.ID); err != nil {
				return err
			}
		default:
			ep, err := q.pos(e.ID)
			if err != nil {
				return err
			}
			q.mark(b, ep, object.Blob)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("tree %s: %w", id, err)
	}
	return nil
}

// Objects answers a fetch from the stack's bitmaps: everything reachable
// from the wants and not from the haves, filtered, plus include-tag's
// tags. The result is exactly `git rev-list --objects wants --not haves`
// (what the walk gives without Sparse, which may send a few more objects).
//
// g must read the repository's objects (the stack's packs and any packs
// pushed since). ErrUnsupported means the request needs the walk:
// shallow and deepen requests, blob:limit and tree:<n> filters other than
// tree:0, and filtered requests with wants that are (or peel to) trees or
// blobs. Without a filter such a want is a fill's root like any other
// (git's own history has a tag of a tree, v2.6.11-tree: its clone would
// otherwise walk every object). Any other error
// (a corrupt mask, a missing object) also means the caller should walk,
// which reports real repository errors itself.
func (s *Stack) Objects(ctx context.Context, g *walk.Graph, req walk.Request) (*walk.Result, error) {
	if len(req.ClientShallow) > 0 || req.Depth != 0 || req.DeepenSince != 0 || len(req.DeepenNot) > 0 {
		return nil, fmt.Errorf("shallow or deepen: %w", ErrUnsupported)
	}
	var drop []int // type slots the filter removes
	switch f := req.Filter; {
	case f.Kind == walk.FilterNone:
	case f.Kind == walk.FilterBlobNone:
		drop = []int{typeSlot(object.Blob)}
	case f.Kind == walk.FilterTreeDepth && f.TreeDepth == 0:
		drop = []int{typeSlot(object.Tree), typeSlot(object.Blob)}
	default:
		return nil, fmt.Errorf("filter %s: %w", f, ErrUnsupported)
	}
	q, err := newQuery(ctx, s, g)
	if err != nil {
		return nil, err
	}
	// Wanted trees and blobs (or tags of them) are sent whole, whatever
	// the client has, as by the walk and git; under a filter the walk
	// treats them specially too, so a filtered request with one walks.
	var wanted, whole []object.ID
	for _, id := range req.Wants {
		commit, err := q.peelsToCommit(id)
		switch {
		case err != nil:
			return nil, err
		case commit:
			wanted = append(wanted, id)
		case len(drop) > 0:
			return nil, fmt.Errorf("want %s is a tree or blob (or a tag of one) and the request is filtered: %w", id, ErrUnsupported)
		default:
			whole = append(whole, id)
		}
	}
	haves := newBitset(s.span)
	for _, id := range req.Haves {
		// A have we lack tells us nothing, as in the walk.
		if !q.exists(id) {
			continue
		}
		if err := q.fill(&haves, []object.ID{id}); err != nil {
			return nil, fmt.Errorf("have %s: %w", id, err)
		}
	}
	wants := newBitset(s.span)
	if err := q.fill(&wants, wanted); err != nil {
		return nil, fmt.Errorf("wants: %w", err)
	}
	out := wants
	out.andNot(haves)
	if len(whole) > 0 {
		w := newBitset(s.span)
		if err := q.fill(&w, whole); err != nil {
			return nil, fmt.Errorf("wants: %w", err)
		}
		// Only trees and blobs the client names (or tags of them) take
		// their contents out: a commit it has says nothing of a tree
		// wanted on its own, in git's rev-list as in the walk.
		var named []object.ID
		for _, id := range req.Haves {
			if !q.exists(id) {
				continue
			}
			commit, err := q.peelsToCommit(id)
			if err != nil {
				return nil, fmt.Errorf("have %s: %w", id, err)
			}
			if !commit {
				named = append(named, id)
			}
		}
		if len(named) > 0 {
			h := newBitset(s.span)
			if err := q.fill(&h, named); err != nil {
				return nil, fmt.Errorf("haves: %w", err)
			}
			w.andNot(h)
		}
		out.or(w)
	}
	for _, s := range drop {
		out.andNot(q.types[s])
	}
	if err := q.includeTags(&out, haves, req.IncludeTags); err != nil {
		return nil, err
	}
	return q.result(out, haves), nil
}

// exists reports whether the repository holds id.
func (q *query) exists(id object.ID) bool {
	if _, ok := q.s.find(id); ok {
		return true
	}
	if h, ok := q.r.(interface{ Has(object.ID) bool }); ok {
		return h.Has(id)
	}
	_, _, err := q.r.ReadObject(id)
	return err == nil
}

// peelsToCommit reports whether want id is a commit or a tag of one
// (false: a tree or blob, or a tag of one, which the walk sends whole).
func (q *query) peelsToCommit(id object.ID) (bool, error) {
	want := id
	if q.s.hasMask(id) {
		return true, nil // the builder stores masks only for commits and their tags
	}
	for range maxTagChain + 1 {
		if c, err := q.g.Commit(id); err == nil && c != nil {
			return true, nil
		} else if !errors.Is(err, walk.ErrNotCommit) {
			return false, fmt.Errorf("want %s: %w", want, err)
		}
		typ, data, err := q.r.ReadObject(id)
		if err != nil {
			return false, fmt.Errorf("want %s: %w", want, err)
		}
		if typ != object.Tag {
			return false, nil
		}
		t, err := object.ParseTag(data)
		if err != nil {
			return false, fmt.Errorf("want %s: parse tag: %w", want, err)
		}
		id = t.Object
	}
	return false, fmt.Errorf("want %s: tag chain too long: %w", want, ErrUnsupported)
}

// includeTags adds the chain of every annotated tag whose peeled object is
// sent, stopping at tags the client has or already gets, as the walk does.
func (q *query) includeTags(out *bitset, haves bitset, refs []walk.TagRef) error {
	for _, ref := range refs {
		if p, ok := q.lookup(ref.Peeled); !ok || !out.has(p) {
			continue
		}
		id := ref.Tag
		for range maxTagChain + 1 {
			p, err := q.pos(id)
			if err != nil {
				return err
			}
			if haves.has(p) || out.has(p) {
				break
			}
			t, err := walk.ReadTag(q.r, id)
			if err != nil {
				return fmt.Errorf("include tag: %w", err)
			}
			q.mark(out, p, object.Tag)
			if t.ObjectType != object.Tag {
				break
			}
			id = t.Object
		}
	}
	return nil
}

// result lists out as the walk does: commits, then tags, then trees and
// blobs. The client holds everything in haves, so a thin pack may use any
// of it as a delta base.
func (q *query) result(out, haves bitset) *walk.Result {
	objs := make([]object.ID, 0, out.count())
	var commits int
	rest := append(bitset(nil), out...) // what is left to list
	for _, t := range []object.Type{object.Commit, object.Tag, object.Tree, object.Blob} {
		m := append(bitset(nil), rest...)
		m.and(q.types[typeSlot(t)])
		m.each(func(p int) { objs = append(objs, q.id(p)) })
		if t == object.Commit {
			commits = len(objs)
		}
		rest.andNot(m)
	}
	// Every set bit has a type (stored masks are typed by the builder, the
	// fills type what they add); anything else would be a corrupt file,
	// and the checksum stands against that.
	rest.each(func(p int) { objs = append(objs, q.id(p)) })
	has := func(b bitset) func(object.ID) bool {
		return func(id object.ID) bool {
			p, ok := q.lookup(id)
			return ok && b.has(p)
		}
	}
	return walk.NewResult(objs, commits, has(out), has(haves))
}
