package walk

import (
	"context"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// Node flags of a commit walk.
const (
	fUninteresting uint8 = 1 << iota
	fQueued
	fExpanded // parents have been pushed
	fListed   // popped while interesting: part of the walk's output list
)

// slop is how many extra uninteresting commits git's limit_list pops once
// only uninteresting commits remain, to tolerate committer clock skew.
const slop = 5

// ctxCheckEvery is how many loop iterations pass between context checks.
const ctxCheckEvery = 256

type rnode struct {
	id    object.ID
	c     *Commit
	seq   uint32 // insertion order, breaks time ties like git's prio queue
	flags uint8
}

// revWalk is git's revision walk over commits (revision.c limit_list):
// commits reachable from interesting tips minus those reachable from
// uninteresting tips, popped newest first by committer time. It is single
// use and not safe for concurrent use.
type revWalk struct {
	ctx    context.Context
	g      *Graph
	grafts *idSet // commits treated as parentless (shallow boundaries)
	// since, if non-zero, drops commits older than it (rev-list --max-age).
	since int64

	idx   map[object.ID]int32
	nodes []rnode
	heap  []int32
	// queuedInteresting counts queued nodes without fUninteresting, so the
	// "everybody uninteresting" test is O(1).
	queuedInteresting int
	limited           bool
	steps             int
	// maxSteps, if positive, stops run after that many commits popped,
	// with exhausted set: a walk with a work budget.
	maxSteps  int
	exhausted bool
}

func newRevWalk(ctx context.Context, g *Graph, grafts *idSet) *revWalk {
	return &revWalk{ctx: ctx, g: g, grafts: grafts, idx: make(map[object.ID]int32)}
}

// parents returns c's parents as the walk sees them (none at a graft).
func (w *revWalk) parents(n *rnode) []object.ID {
	if w.grafts != nil && w.grafts.Has(n.id) {
		return nil
	}
	return n.c.Parents
}

// node returns the index of id's node, loading the commit if needed.
func (w *revWalk) node(id object.ID, c *Commit) (int32, error) {
	if i, ok := w.idx[id]; ok {
		return i, nil
	}
	if c == nil {
		var err error
		if c, err = w.g.Commit(id); err != nil {
			return -1, err
		}
	}
	i := int32(len(w.nodes))
	w.nodes = append(w.nodes, rnode{id: id, c: c, seq: uint32(i)})
	w.idx[id] = i
	return i, nil
}

// addTip adds a starting commit. c may be nil.
func (w *revWalk) addTip(id object.ID, c *Commit, uninteresting bool) error {
	i, err := w.node(id, c)
	if err != nil {
		return err
	}
	if uninteresting {
		w.limited = true
		w.markUninteresting(i)
	}
	w.push(i)
	return nil
}

// markUninteresting flags i and, for nodes whose parents were already
// pushed, their ancestors (git's mark_parents_uninteresting).
func (w *revWalk) markUninteresting(i int32) {
	stack := []int32{i}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := &w.nodes[i]
		if n.flags&fUninteresting != 0 {
			continue
		}
		n.flags |= fUninteresting
		if n.flags&fQueued != 0 {
			w.queuedInteresting--
		}
		if n.flags&fExpanded == 0 {
			continue
		}
		for _, p := range w.parents(n) {
			if j, ok := w.idx[p]; ok {
				stack = append(stack, j)
			}
		}
	}
}

func (w *revWalk) less(a, b int32) bool {
	na, nb := &w.nodes[a], &w.nodes[b]
	if na.c.Time != nb.c.Time {
		return na.c.Time > nb.c.Time
	}
	return na.seq < nb.seq
}

func (w *revWalk) push(i int32) {
	n := &w.nodes[i]
	if n.flags&fQueued != 0 {
		return
	}
	n.flags |= fQueued
	if n.flags&fUninteresting == 0 {
		w.queuedInteresting++
	}
	h := append(w.heap, i)
	for k := len(h) - 1; k > 0; {
		parent := (k - 1) / 2
		if !w.less(h[k], h[parent]) {
			break
		}
		h[k], h[parent] = h[parent], h[k]
		k = parent
	}
	w.heap = h
}

func (w *revWalk) pop() int32 {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for k := 0; ; {
		l, r, m := 2*k+1, 2*k+2, k
		if l < len(h) && w.less(h[l], h[m]) {
			m = l
		}
		if r < len(h) && w.less(h[r], h[m]) {
			m = r
		}
		if m == k {
			break
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
	w.heap = h
	n := &w.nodes[top]
	n.flags &^= fQueued
	if n.flags&fUninteresting == 0 {
		w.queuedInteresting--
	}
	return top
}

// seen reports whether id already has a node (queued, popped or marked).
func (w *revWalk) seen(id object.ID) bool {
	_, ok := w.idx[id]
	return ok
}

// run walks until done and returns the nodes popped while interesting, in
// pop order. Some may have become uninteresting afterwards; callers check
// the flags (as git's get_revision does).
func (w *revWalk) run() ([]int32, error) {
	var list []int32
	lastDate := int64(1<<63 - 1)
	budget := slop
	for len(w.heap) > 0 {
		if w.steps++; w.steps%ctxCheckEvery == 0 {
			if err := w.ctx.Err(); err != nil {
				return nil, err
			}
		}
		if w.maxSteps > 0 && w.steps > w.maxSteps {
			w.exhausted = true
			break
		}
		i := w.pop()
		n := &w.nodes[i]
		if w.since != 0 && n.c.Time < w.since {
			if !w.limited {
				continue // unlimited rev-list --max-age: drop, do not expand
			}
			w.markUninteresting(i)
		}
		if err := w.expand(i); err != nil {
			return nil, err
		}
		n = &w.nodes[i] // expand may grow w.nodes
		if n.flags&fUninteresting != 0 {
			// git's still_interesting: stop once only uninteresting
			// commits are queued, after a few extra for clock skew.
			if len(w.heap) == 0 {
				break
			}
			if lastDate <= w.nodes[w.heap[0]].c.Time || w.queuedInteresting > 0 {
				budget = slop
				continue
			}
			if budget--; budget == 0 {
				break
			}
			continue
		}
		lastDate = n.c.Time
		n.flags |= fListed
		list = append(list, i)
	}
	return list, nil
}

// expand pushes i's parents. Parents of uninteresting commits become
// uninteresting; a missing parent is an error only on the interesting side
// (git parses uninteresting parents gently).
func (w *revWalk) expand(i int32) error {
	n := &w.nodes[i]
	n.flags |= fExpanded
	uninteresting := n.flags&fUninteresting != 0
	for _, p := range w.parents(n) {
		known := w.seen(p)
		j, err := w.node(p, nil)
		if err != nil {
			if uninteresting {
				continue
			}
			return fmt.Errorf("walk parents of %s: %w", w.nodes[i].id, err)
		}
		if uninteresting {
			w.markUninteresting(j)
		}
		if !known { // git's SEEN: each commit is queued at most once
			w.push(j)
		}
	}
	return nil
}
