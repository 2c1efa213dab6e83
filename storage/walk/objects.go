package walk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rgit/rgit/storage/object"
)

// TagRef is an annotated tag in the repository and the non-tag object its
// chain finally points at, for include-tag.
type TagRef struct {
	Tag    object.ID
	Peeled object.ID
}

// InfiniteDepth is git's INFINITE_DEPTH, the depth `git fetch --unshallow`
// sends.
const InfiniteDepth = 1<<31 - 1

// Request describes one fetch: what the client wants, what it has, its
// shallow state and the shallow/filter options it asked for.
type Request struct {
	Wants []object.ID
	// Haves are the client's commits (or other objects) the server also
	// holds; ids the server lacks are ignored.
	Haves []object.ID
	// ClientShallow are the client's current shallow boundary commits.
	ClientShallow []object.ID
	// Depth is "deepen <n>" (0 = none). With DeepenRelative it counts from
	// the client's current shallow boundary instead of from the wants.
	Depth          int
	DeepenSince    int64       // "deepen-since <time>" (0 = none)
	DeepenNot      []object.ID // "deepen-not", resolved to ids
	DeepenRelative bool
	Filter         Filter
	// IncludeTags lists the repository's annotated tags; a tag whose peeled
	// object is sent is sent too (include-tag).
	IncludeTags []TagRef
	// Sparse marks the haves' trees uninteresting only along paths where
	// a sent tree differs from a have tree (git's pack.useSparse, the
	// default of upload-pack since git 2.27). An incremental fetch then
	// reads a few trees instead of the haves' whole trees, at the price
	// git accepts: an object the client holds only under another path
	// may be sent again. Without Sparse the result is exactly
	// `git rev-list --objects`.
	Sparse bool
}

// Result is the outcome of Objects.
type Result struct {
	// Objects to send: commits newest first, then tags, then trees and
	// blobs in traversal order. Each id appears once.
	Objects []object.ID
	// Commits is how many leading entries of Objects are commits.
	Commits int
	// Shallow are new shallow boundary commits to announce; Unshallow are
	// client shallow commits whose history is now sent.
	Shallow, Unshallow []object.ID
	// Edges are uninteresting commits that are parents of sent commits:
	// the client has them, so their trees may serve as thin-pack bases.
	Edges []object.ID

	set      *idSet
	excluded *idSet // trees, blobs and tags marked uninteresting

	// has and clientHas replace set and excluded in a Result made by
	// NewResult.
	has, clientHas func(object.ID) bool
}

// NewResult wraps an object set computed elsewhere (from reachability
// bitmaps) as a Result: objects as in Objects (commits first, commits of
// them), has reports membership in objects and clientHas what the client
// is known to hold. It has no shallow updates and no edges.
func NewResult(objects []object.ID, commits int, has, clientHas func(object.ID) bool) *Result {
	return &Result{Objects: objects, Commits: commits, has: has, clientHas: clientHas}
}

// ClientHas reports whether the walk established that the client holds id:
// an edge commit, or a tree, blob or tag under the uninteresting boundary.
// Those are the objects a thin pack may use as delta bases.
func (r *Result) ClientHas(id object.ID) bool {
	if r.clientHas != nil {
		return r.clientHas(id)
	}
	if r.excluded != nil && r.excluded.Has(id) {
		return true
	}
	return slices.Contains(r.Edges, id)
}

// Has reports whether id is in Objects.
func (r *Result) Has(id object.ID) bool {
	if r.has != nil {
		return r.has(id)
	}
	return r.set.Has(id)
}

// Len returns len(r.Objects).
func (r *Result) Len() int { return len(r.Objects) }

// ErrDeepenConflict is returned when Depth is combined with DeepenSince or
// DeepenNot, which git's upload-pack refuses too.
var ErrDeepenConflict = errors.New("deepen and deepen-since (or deepen-not) cannot be used together")

// Objects computes what a fetch must send: everything reachable from
// req.Wants and not from req.Haves, cut at shallow boundaries and thinned
// by req.Filter, as git's upload-pack and pack-objects decide it.
//
// Like git, it marks the commits reachable from the haves uninteresting
// with a limited, date-ordered walk and then marks the trees of the
// uninteresting commits at the boundary, so unchanged subtrees are skipped
// without walking the haves' whole history tree by tree.
func Objects(ctx context.Context, g *Graph, req Request) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	plan, err := planShallow(ctx, g, req)
	if err != nil {
		return nil, err
	}
	w := newObjWalk(ctx, g, req.Filter)
	rw := newRevWalk(ctx, g, plan.grafts)

	// Haves first, so that tags and trees the client has are excluded
	// before the want side looks at them.
	for _, id := range append(req.Haves[:len(req.Haves):len(req.Haves)], plan.haves...) {
		p, err := g.peel(id)
		if err != nil {
			if errors.Is(err, object.ErrNotFound) {
				continue // a have we lack tells us nothing
			}
			return nil, fmt.Errorf("have %s: %w", id, err)
		}
		for _, t := range p.tags {
			w.excluded.Add(t)
		}
		switch p.typ {
		case object.Commit:
			if err := rw.addTip(p.id, p.commit, true); err != nil {
				return nil, fmt.Errorf("have %s: %w", id, err)
			}
		case object.Tree:
			if err := w.markTreeUninteresting(p.id); err != nil {
				return nil, err
			}
		default:
			w.excluded.Add(p.id)
		}
	}

	var pending []peeled // wanted trees and blobs, walked after commits
	for _, id := range append(req.Wants[:len(req.Wants):len(req.Wants)], plan.wants...) {
		p, err := g.peel(id)
		if err != nil {
			return nil, fmt.Errorf("want %s: %w", id, err)
		}
		for _, t := range p.tags {
			if !w.excluded.Has(t) && w.out.Add(t) {
				w.tags = append(w.tags, t)
			}
		}
		if p.typ == object.Commit {
			if err := rw.addTip(p.id, p.commit, false); err != nil {
				return nil, fmt.Errorf("want %s: %w", id, err)
			}
		} else {
			pending = append(pending, p)
		}
	}

	list, err := rw.run()
	if err != nil {
		return nil, err
	}
	res := &Result{Shallow: plan.shallow, Unshallow: plan.unshallow, set: w.out, excluded: w.excluded}
	walkTrees := !(req.Filter.Kind == FilterTreeDepth && req.Filter.TreeDepth == 0)
	if err := w.markEdges(rw, list, walkTrees, req.Sparse, res); err != nil {
		return nil, err
	}

	var commits []object.ID
	for _, i := range list {
		n := &rw.nodes[i]
		if n.flags&fUninteresting == 0 && w.out.Add(n.id) {
			commits = append(commits, n.id)
		}
	}
	if walkTrees {
		for _, i := range list {
			n := &rw.nodes[i]
			if n.flags&fUninteresting == 0 {
				if err := w.rootTree(n.c.Tree); err != nil {
					return nil, fmt.Errorf("commit %s: %w", n.id, err)
				}
			}
		}
	}
	for _, p := range pending {
		if err := w.userGiven(p); err != nil {
			return nil, err
		}
	}
	if err := w.includeTags(req.IncludeTags); err != nil {
		return nil, err
	}

	res.Commits = len(commits)
	res.Objects = make([]object.ID, 0, len(commits)+len(w.tags)+len(w.rest))
	res.Objects = append(append(append(res.Objects, commits...), w.tags...), w.rest...)
	g.lastObjects.Store(int64(len(res.Objects)))
	return res, nil
}

// objWalk is the tree/blob half of Objects.
type objWalk struct {
	ctx    context.Context
	r      object.Reader
	sizes  SizeReader // nil if the reader cannot size objects cheaply
	filter Filter

	excluded  *idSet // uninteresting trees, blobs and tags
	out       *idSet // everything selected so far
	omitted   *idSet // blobs a blob:limit filter already rejected
	treeDepth map[object.ID]int32

	tags, rest []object.ID
	steps      int
}

func newObjWalk(ctx context.Context, g *Graph, f Filter) *objWalk {
	w := &objWalk{ctx: ctx, r: g.r, filter: f, excluded: newIDSet(0), out: newIDSet(int(g.lastObjects.Load()))}
	w.sizes, _ = g.r.(SizeReader)
	switch f.Kind {
	case FilterBlobLimit:
		w.omitted = newIDSet(0)
	case FilterTreeDepth:
		w.treeDepth = make(map[object.ID]int32)
	}
	return w
}

func (w *objWalk) tick() error {
	if w.steps++; w.steps%ctxCheckEvery == 0 {
		return w.ctx.Err()
	}
	return nil
}

func (w *objWalk) readTree(id object.ID) ([]byte, error) {
	typ, data, err := w.r.ReadObject(id)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", id, err)
	}
	if typ != object.Tree {
		return nil, fmt.Errorf("object %s: expected tree, got %s: %w", id, typ, object.ErrMalformed)
	}
	return data, nil
}

// markTreeUninteresting marks a tree and everything under it as held by
// the client (git's mark_tree_uninteresting). Subtrees already marked are
// not re-read; missing trees are skipped as git does.
func (w *objWalk) markTreeUninteresting(id object.ID) error {
	if !w.excluded.Add(id) {
		return nil
	}
	if err := w.tick(); err != nil {
		return err
	}
	data, err := w.readTree(id)
	if err != nil {
		if errors.Is(err, object.ErrNotFound) {
			return nil
		}
		return err
	}
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		switch {
		case e.IsGitlink():
		case e.IsTree():
			if err := w.markTreeUninteresting(e.ID); err != nil {
				return err
			}
		default:
			w.excluded.Add(e.ID)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("tree %s: %w", id, err)
	}
	return nil
}

// markEdges applies git's mark_edges_uninteresting to the walk's list: the
// trees of listed commits that turned uninteresting, and of uninteresting
// parents of listed commits, are marked uninteresting (completely, or with
// sparse only where they meet sent trees). It also records those parents
// as edges.
func (w *objWalk) markEdges(rw *revWalk, list []int32, trees, sparse bool, res *Result) error {
	edges := newIDSet(0)
	// roots collects, for the sparse walk, every listed commit's root tree
	// and the edge parents' root trees: the first level of its path groups.
	var roots []object.ID
	markRoot := func(tree object.ID) error {
		if sparse {
			w.excluded.Add(tree)
			return nil
		}
		return w.markTreeUninteresting(tree)
	}
	for _, i := range list {
		n := &rw.nodes[i]
		if sparse {
			roots = append(roots, n.c.Tree)
		}
		if n.flags&fUninteresting != 0 {
			if trees {
				if err := markRoot(n.c.Tree); err != nil {
					return err
				}
			}
			continue
		}
		for _, p := range rw.parents(n) {
			j, ok := rw.idx[p]
			if !ok || rw.nodes[j].flags&fUninteresting == 0 {
				continue
			}
			if edges.Add(p) {
				res.Edges = append(res.Edges, p)
			}
			if trees {
				if err := markRoot(rw.nodes[j].c.Tree); err != nil {
					return err
				}
				if sparse {
					roots = append(roots, rw.nodes[j].c.Tree)
				}
			}
		}
	}
	if !trees || !sparse {
		return nil
	}
	return w.markSparse(roots)
}

// markSparse is git's mark_trees_uninteresting_sparse: trees holds the
// trees found at one path (the root trees at the top). Only when some of
// them are uninteresting and some are not is anything read: the children
// of uninteresting trees are marked uninteresting, and the children are
// grouped by entry name and compared again one level down. Paths where
// the sent and the held trees agree are settled by the tree ids alone.
func (w *objWalk) markSparse(trees []object.ID) error {
	var hasInteresting, hasUninteresting bool
	for _, t := range trees {
		if w.excluded.Has(t) {
			hasUninteresting = true
		} else {
			hasInteresting = true
		}
	}
	if !hasInteresting || !hasUninteresting {
		return nil
	}
	if err := w.tick(); err != nil {
		return err
	}
	var names []string // first-seen order, so the walk is deterministic
	byName := make(map[string][]object.ID)
	seen := newIDSet(len(trees))
	for _, t := range trees {
		if !seen.Add(t) {
			continue
		}
		data, err := w.readTree(t)
		if err != nil {
			if errors.Is(err, object.ErrNotFound) {
				continue // as git's failed parse_tree: nothing to mark
			}
			return err
		}
		uninteresting := w.excluded.Has(t)
		it := object.NewTreeIter(data)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			switch {
			case e.IsGitlink():
				continue
			case e.IsTree():
				name := string(e.Name)
				if _, ok := byName[name]; !ok {
					names = append(names, name)
				}
				byName[name] = append(byName[name], e.ID)
			}
			if uninteresting {
				w.excluded.Add(e.ID)
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("tree %s: %w", t, err)
		}
	}
	for _, name := range names {
		if err := w.markSparse(byName[name]); err != nil {
			return err
		}
	}
	return nil
}

// rootTree walks a sent commit's root tree under the filter.
func (w *objWalk) rootTree(id object.ID) error {
	if w.filter.Kind == FilterTreeDepth {
		return w.treeAtDepth(id, 0)
	}
	return w.tree(id)
}

// tree selects a tree and walks its entries (no depth filter).
func (w *objWalk) tree(id object.ID) error {
	if w.excluded.Has(id) || !w.out.Add(id) {
		return nil
	}
	w.rest = append(w.rest, id)
	return w.children(id, 0)
}

// treeAtDepth is git's tree:<n> filter: a tree at depth d is selected if
// d < n, and is walked again if later met at a shallower depth, because its
// entries may then be within the limit.
func (w *objWalk) treeAtDepth(id object.ID, d int32) error {
	if w.excluded.Has(id) {
		return nil
	}
	if prev, ok := w.treeDepth[id]; ok && d >= prev {
		return nil
	}
	w.treeDepth[id] = d
	if int(d) >= w.filter.TreeDepth {
		return nil
	}
	if w.out.Add(id) {
		w.rest = append(w.rest, id)
	}
	return w.children(id, d+1)
}

// children walks the entries of tree id, which sit at depth d.
func (w *objWalk) children(id object.ID, d int32) error {
	if err := w.tick(); err != nil {
		return err
	}
	data, err := w.readTree(id)
	if err != nil {
		return err
	}
	depthFilter := w.filter.Kind == FilterTreeDepth
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		switch {
		case e.IsGitlink():
			// Submodule commits live in another repository.
		case e.IsTree():
			if depthFilter {
				err = w.treeAtDepth(e.ID, d)
			} else {
				err = w.tree(e.ID)
			}
		case depthFilter && int(d) >= w.filter.TreeDepth:
		default:
			err = w.blob(e.ID, false)
		}
		if err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("tree %s: %w", id, err)
	}
	return nil
}

// blob selects a blob unless excluded or filtered. Blobs the client named
// itself (userGiven) bypass the filter, as in git.
func (w *objWalk) blob(id object.ID, userGiven bool) error {
	if w.excluded.Has(id) || w.out.Has(id) {
		return nil
	}
	if !userGiven {
		switch w.filter.Kind {
		case FilterBlobNone:
			return nil
		case FilterBlobLimit:
			if w.omitted.Has(id) {
				return nil
			}
			size, err := w.size(id)
			if err != nil {
				return err
			}
			if size >= w.filter.BlobLimit {
				w.omitted.Add(id)
				return nil
			}
		}
	}
	w.out.Add(id)
	w.rest = append(w.rest, id)
	return nil
}

func (w *objWalk) size(id object.ID) (int64, error) {
	if w.sizes != nil {
		_, n, err := w.sizes.ReadHeader(id)
		if err != nil {
			return 0, fmt.Errorf("size of blob %s: %w", id, err)
		}
		return n, nil
	}
	_, data, err := w.r.ReadObject(id)
	if err != nil {
		return 0, fmt.Errorf("size of blob %s: %w", id, err)
	}
	return int64(len(data)), nil
}

// userGiven walks a wanted (or want-peeled) tree or blob. The object itself
// is always sent; filters apply to what it contains, and a wanted tree's
// entries count as depth 0 for tree:<n>, as in git.
func (w *objWalk) userGiven(p peeled) error {
	if p.typ == object.Blob {
		return w.blob(p.id, true)
	}
	if p.typ != object.Tree {
		return fmt.Errorf("want %s: unexpected %s", p.id, p.typ)
	}
	if w.filter.Kind != FilterTreeDepth {
		return w.tree(p.id)
	}
	if w.excluded.Has(p.id) {
		return nil
	}
	if prev, ok := w.treeDepth[p.id]; ok && prev <= -1 {
		return nil
	}
	w.treeDepth[p.id] = -1
	if w.out.Add(p.id) {
		w.rest = append(w.rest, p.id)
	}
	return w.children(p.id, 0)
}

// includeTags adds the chain of every annotated tag whose peeled object is
// being sent (pack-objects --include-tag).
func (w *objWalk) includeTags(refs []TagRef) error {
	for _, ref := range refs {
		if !w.out.Has(ref.Peeled) {
			continue
		}
		id := ref.Tag
		for depth := 0; depth <= maxTagChain; depth++ {
			if w.excluded.Has(id) || w.out.Has(id) {
				break
			}
			t, err := ReadTag(w.r, id)
			if err != nil {
				return fmt.Errorf("include tag: %w", err)
			}
			w.out.Add(id)
			w.tags = append(w.tags, id)
			if t.ObjectType != object.Tag {
				break
			}
			id = t.Object
		}
	}
	return nil
}

// ReadTag reads and parses the annotated tag id; another type is an error.
func ReadTag(r object.Reader, id object.ID) (object.TagInfo, error) {
	typ, data, err := r.ReadObject(id)
	if err != nil {
		return object.TagInfo{}, fmt.Errorf("tag %s: %w", id, err)
	}
	if typ != object.Tag {
		return object.TagInfo{}, fmt.Errorf("tag %s: object is a %s: %w", id, typ, object.ErrMalformed)
	}
	t, err := object.ParseTag(data)
	if err != nil {
		return object.TagInfo{}, fmt.Errorf("tag %s: %w", id, err)
	}
	return t, nil
}
