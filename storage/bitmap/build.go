package bitmap

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

// ErrIncomplete is returned by Build when a tip reaches an object the pack
// does not hold: bitmaps describe a pack that is a whole repository.
var ErrIncomplete = errors.New("pack does not hold everything reachable from the tips")

// Defaults of BuildOptions.
const (
	// DefaultInterval is how many commits apart (in topological order)
	// Build stores masks besides the tips and recent commits. A query from
	// an unmasked commit walks at most about this many commits, reading
	// only trees that changed.
	DefaultInterval = 64
	// DefaultRecent is how many of the newest commits (by committer date)
	// all get a mask, as git's bitmap selection does: incremental fetches
	// have their haves there, and then need no walk at all.
	DefaultRecent = 100
)

// xorWindow is how many preceding masks Build tries as XOR bases.
const xorWindow = 10

// BuildOptions tune Build.
type BuildOptions struct {
	// Interval: also store a mask for every Interval-th commit of the
	// history (0: DefaultInterval).
	Interval int
	// Recent: store a mask for each of the Recent newest commits
	// (0: DefaultRecent, negative: none).
	Recent int
}

// Build computes the bitmap index of p for a repository whose refs point
// at tips (commits or annotated tags; others get no mask). Every object
// reachable from the tips must be in p.
//
// Masks are computed oldest first, each by a fill that stops at the masks
// already built, so the whole build reads each tree about once.
func Build(ctx context.Context, p *pack.Pack, tips []object.ID, opts BuildOptions) (*Index, error) {
	count := p.Index().Count()
	x := &Index{p: p, count: count, span: count, entries: make(map[object.ID]int)}
	g := walk.NewGraph(p, 0)
	q := &query{ctx: ctx, s: stackOf([]*pack.Pack{p}, []*Index{x}), g: g, r: p, strict: true}
	for t := range q.types {
		q.types[t] = newBitset(count)
	}
	var tags []object.ID    // tips that are tags peeling to commits
	var commits []object.ID // tips that are commits, peeled tags' commits
	isTip := make(map[object.ID]bool)
	for _, tip := range tips {
		c, isTag, err := peelToCommit(p, tip)
		if err != nil {
			return nil, fmt.Errorf("build bitmap: tip %s: %w", tip, incomplete(err))
		}
		if c.IsZero() {
			continue
		}
		if isTag {
			tags = append(tags, tip)
		}
		if !isTip[c] {
			isTip[c] = true
			commits = append(commits, c)
		}
	}
	order, err := postOrder(ctx, g, commits, nil)
	if err != nil {
		return nil, fmt.Errorf("build bitmap: %w", incomplete(err))
	}
	return (&builder{q: q}).build(order, isTip, tags, opts)
}

// BuildLayer computes the bitmap of p layered over below, the packs a
// repository holds besides p, in stack order: xs[i] is the bitmap of
// below[i] or nil. Every object reachable from p's commits must be in p or
// below. Masks are stored for p's commits only: those no other commit of
// p has as parent, those tips names, the newest, and every Interval-th;
// their fills stop at the masks of the layers below, so a layer over a
// bitmapped history costs about the objects of p.
func BuildLayer(ctx context.Context, below []*pack.Pack, xs []*Index, p *pack.Pack, tips []object.ID, opts BuildOptions) (*Index, error) {
	if len(below) == 0 || len(below) > maxBases {
		return nil, fmt.Errorf("build bitmap layer over %d packs: want 1 to %d", len(below), maxBases)
	}
	lower := stackOf(below, xs)
	types, err := lower.types()
	if err != nil {
		return nil, fmt.Errorf("build bitmap layer: %w", err)
	}
	x := &Index{p: p, count: p.Index().Count(), span: lower.span + p.Index().Count(), entries: make(map[object.ID]int)}
	for _, b := range below {
		x.bases = append(x.bases, refOf(b))
	}
	if x.span > math.MaxInt32 {
		return nil, fmt.Errorf("build bitmap layer over %d objects: too many", x.span)
	}
	s := stackOf(append(slices.Clip(below), p), append(slices.Clip(lower.layers), x))
	g := walk.NewGraph(s.set, 0)
	q := &query{ctx: ctx, s: s, g: g, r: s.set, strict: true, types: types}
	own, err := ownCommits(ctx, g, p)
	if err != nil {
		return nil, fmt.Errorf("build bitmap layer: %w", incomplete(err))
	}
	isTip := make(map[object.ID]bool)
	for id := range own {
		isTip[id] = true
	}
	for id := range own {
		c, err := g.Commit(id)
		if err != nil {
			return nil, fmt.Errorf("build bitmap layer: %w", incomplete(err))
		}
		for _, pid := range c.Parents {
			delete(isTip, pid)
		}
	}
	for _, t := range tips {
		if own[t] {
			isTip[t] = true
		}
	}
	heads := slices.SortedFunc(maps.Keys(isTip), func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	order, err := postOrder(ctx, g, heads, func(id object.ID) bool { return own[id] })
	if err != nil {
		return nil, fmt.Errorf("build bitmap layer: %w", incomplete(err))
	}
	return (&builder{q: q}).build(order, isTip, nil, opts)
}

// ownCommits returns the commits p holds.
func ownCommits(ctx context.Context, g *walk.Graph, p *pack.Pack) (map[object.ID]bool, error) {
	out := make(map[object.ID]bool)
	ix := p.Index()
	for i := range ix.Count() {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		id := ix.ID(i)
		typ, _, err := p.ReadHeader(id)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		if typ == object.Commit {
			out[id] = true
		}
	}
	return out, nil
}

// build stores the masks of order's commits that are tips, among the
// newest, or at the interval, then those of tags, and seals the index.
func (bl *builder) build(order []object.ID, isTip map[object.ID]bool, tags []object.ID, opts BuildOptions) (*Index, error) {
	interval, recent := opts.Interval, opts.Recent
	if interval <= 0 {
		interval = DefaultInterval
	}
	if recent == 0 {
		recent = DefaultRecent
	}
	newest, err := newestCommits(bl.q.g, order, recent)
	if err != nil {
		return nil, fmt.Errorf("build bitmap: %w", err)
	}
	for i, c := range order {
		if !isTip[c] && !newest[c] && (i+1)%interval != 0 {
			continue
		}
		if err := bl.store(c); err != nil {
			return nil, err
		}
	}
	for _, t := range tags {
		if err := bl.store(t); err != nil {
			return nil, err
		}
	}
	x := bl.x()
	for t, b := range bl.q.types {
		// Masks are encoded at the index's full width; a layer's type
		// masks start from narrower ones below it.
		b = append(b, make(bitset, (x.span+63)/64-len(b))...)
		x.types[t] = encode(nil, b)
	}
	return x, nil
}

// builder stores masks, each XOR-ed with whichever of the last few masks
// makes it smallest.
type builder struct {
	q      *query
	recent []builtMask
	// scratch holds the candidate encodings: only the smallest is kept,
	// copied to its exact size (append's spare capacity, kept for every
	// mask, was half the memory of a build).
	scratch, best []byte
	diff, spare   bitset
}

type builtMask struct {
	index, depth int
	bits         bitset
}

// x is the index being built: the stack's top layer.
func (bl *builder) x() *Index { return bl.q.s.layers[len(bl.q.s.layers)-1] }

// store computes and keeps the mask of id.
func (bl *builder) store(id object.ID) error {
	x := bl.x()
	if _, ok := x.entries[id]; ok {
		return nil
	}
	b := bl.spare
	if b == nil {
		b = newBitset(x.span)
	}
	bl.spare = nil
	if err := bl.q.fill(&b, []object.ID{id}); err != nil {
		return fmt.Errorf("build bitmap of %s: %w", id, incomplete(err))
	}
	base, depth := -1, 0
	bl.best = encode(bl.best[:0], b)
	if len(bl.diff) != len(b) {
		bl.diff = make(bitset, len(b))
	}
	for _, r := range bl.recent {
		if r.depth >= maxChain || len(r.bits) != len(b) {
			continue
		}
		for w := range bl.diff {
			bl.diff[w] = b[w] ^ r.bits[w]
		}
		if bl.scratch = encode(bl.scratch[:0], bl.diff); len(bl.scratch) < len(bl.best) {
			base, depth = r.index, r.depth+1
			bl.best, bl.scratch = bl.scratch, bl.best
		}
	}
	x.entries[id] = len(x.list)
	x.list = append(x.list, entry{id: id, base: base, mask: bytes.Clone(bl.best)})
	if len(bl.recent) == xorWindow {
		// The oldest mask leaves the window: the next one reuses its words.
		bl.spare = bl.recent[0].bits
		clear(bl.spare)
		bl.recent = append(bl.recent[:0], bl.recent[1:]...)
	}
	bl.recent = append(bl.recent, builtMask{index: len(x.list) - 1, depth: depth, bits: b})
	return nil
}

// newestCommits returns the n commits of order with the newest committer
// dates (ties: later in order first).
func newestCommits(g *walk.Graph, order []object.ID, n int) (map[object.ID]bool, error) {
	if n <= 0 {
		return nil, nil
	}
	type dated struct {
		i    int
		time int64
	}
	ds := make([]dated, len(order))
	for i, id := range order {
		c, err := g.Commit(id)
		if err != nil {
			return nil, err
		}
		ds[i] = dated{i, c.Time}
	}
	slices.SortFunc(ds, func(a, b dated) int {
		if c := cmp.Compare(b.time, a.time); c != 0 {
			return c
		}
		return cmp.Compare(b.i, a.i)
	})
	out := make(map[object.ID]bool, n)
	for _, d := range ds[:min(n, len(ds))] {
		out[order[d.i]] = true
	}
	return out, nil
}

// incomplete marks errors that mean the pack lacks reachable objects.
func incomplete(err error) error {
	if errors.Is(err, errOutside) || errors.Is(err, object.ErrNotFound) {
		return fmt.Errorf("%w: %v", ErrIncomplete, err)
	}
	return err
}

// peelToCommit follows tags from id. It returns the zero id for a tip that
// is (or peels to) a tree or blob.
func peelToCommit(r object.Reader, id object.ID) (object.ID, bool, error) {
	isTag := false
	for range maxTagChain + 1 {
		typ, data, err := r.ReadObject(id)
		if err != nil {
			return object.ID{}, false, err
		}
		switch typ {
		case object.Commit:
			return id, isTag, nil
		case object.Tag:
			t, err := object.ParseTag(data)
			if err != nil {
				return object.ID{}, false, fmt.Errorf("parse tag %s: %w", id, err)
			}
			isTag, id = true, t.Object
		default:
			return object.ID{}, false, nil
		}
	}
	return object.ID{}, false, fmt.Errorf("tag chain longer than %d: %w", maxTagChain, object.ErrMalformed)
}

// postOrder lists the commits reachable from tips, parents before
// children; with within set, only through commits it accepts.
func postOrder(ctx context.Context, g *walk.Graph, tips []object.ID, within func(object.ID) bool) ([]object.ID, error) {
	type frame struct {
		id   object.ID
		next int // index of the next parent to visit
		c    *walk.Commit
	}
	seen := make(map[object.ID]bool)
	var order []object.ID
	var stack []frame
	for _, tip := range tips {
		if seen[tip] {
			continue
		}
		c, err := g.Commit(tip)
		if err != nil {
			return nil, err
		}
		seen[tip] = true
		stack = append(stack, frame{id: tip, c: c})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(f.c.Parents) {
				order = append(order, f.id)
				stack = stack[:len(stack)-1]
				continue
			}
			pid := f.c.Parents[f.next]
			f.next++
			if seen[pid] || within != nil && !within(pid) {
				continue
			}
			if len(order)%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			pc, err := g.Commit(pid)
			if err != nil {
				return nil, err
			}
			seen[pid] = true
			stack = append(stack, frame{id: pid, c: pc})
		}
	}
	return order, nil
}
