package walk

import (
	"context"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// OkToGiveUp is git's ok_to_give_up: negotiation may stop once every want
// that is a commit reaches one of the common commits. The search never
// descends below the oldest common commit's committer time, so it stays
// bounded; a cancelled ctx or an unreadable want answers false.
func OkToGiveUp(ctx context.Context, g *Graph, wants, common []object.ID) bool {
	if len(common) == 0 {
		return false
	}
	commonSet := newIDSet(len(common))
	minDate := int64(1<<63 - 1)
	for _, id := range common {
		commonSet.Add(id)
		if c, err := g.Commit(id); err == nil && c.Time < minDate {
			minDate = c.Time
		}
	}
	r := reachSearch{ctx: ctx, g: g, common: commonSet, minDate: minDate, state: make(map[object.ID]uint8)}
	for _, id := range wants {
		p, err := g.peel(id)
		if err != nil {
			return false
		}
		if p.typ != object.Commit {
			continue // ancestry cannot tell; git does not wait for these
		}
		if !r.reaches(p.id) {
			return false
		}
	}
	return true
}

const (
	rsVisited uint8 = 1 << iota
	rsReaches
)

// reachSearch is git's can_all_from_reach_with_flag with a date cutoff; its
// memo is shared across the wants of one call.
type reachSearch struct {
	ctx     context.Context
	g       *Graph
	common  *idSet
	minDate int64
	state   map[object.ID]uint8
	steps   int
}

func (r *reachSearch) hit(id object.ID) bool {
	return r.common.Has(id) || r.state[id]&rsReaches != 0
}

func (r *reachSearch) reaches(start object.ID) bool {
	if r.hit(start) {
		return true
	}
	r.state[start] |= rsVisited
	stack := []object.ID{start}
	for len(stack) > 0 {
		if r.steps++; r.steps%ctxCheckEvery == 0 && r.ctx.Err() != nil {
			return false
		}
		top := stack[len(stack)-1]
		if r.hit(top) {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				r.state[stack[len(stack)-1]] |= rsReaches
			}
			continue
		}
		c, err := r.g.Commit(top)
		pushed := false
		if err == nil {
			for _, p := range c.Parents {
				if r.hit(p) {
					r.state[top] |= rsReaches
				}
				if r.state[p]&rsVisited != 0 {
					continue
				}
				r.state[p] |= rsVisited
				if pc, err := r.g.Commit(p); err != nil || pc.Time < r.minDate {
					continue
				}
				stack = append(stack, p)
				pushed = true
				break
			}
		}
		if !pushed {
			stack = stack[:len(stack)-1]
			if r.state[top]&rsReaches != 0 && len(stack) > 0 {
				r.state[stack[len(stack)-1]] |= rsReaches
			}
		}
	}
	return r.hit(start)
}

// ReachableFrom returns the targets that are not reachable from tips (in
// the order given), for "only objects reachable from refs may be wanted".
// Targets equal to a tip cost nothing; commit targets need a limited
// commit walk; tree and blob targets need a tree walk of the tips' history
// and are the expensive case.
func ReachableFrom(ctx context.Context, g *Graph, tips, targets []object.ID) (missing []object.ID, err error) {
	reachable := newIDSet(len(tips))
	for _, id := range tips {
		reachable.Add(id)
	}
	var rest []object.ID
	for _, id := range targets {
		if !reachable.Has(id) {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return nil, nil
	}

	// Tips' tag chains, and the peeled tips themselves.
	var tipCommits []peeled
	var tipOther []peeled
	for _, id := range tips {
		p, err := g.peel(id)
		if err != nil {
			return nil, fmt.Errorf("tip %s: %w", id, err)
		}
		for _, t := range p.tags {
			reachable.Add(t)
		}
		reachable.Add(p.id)
		if p.typ == object.Commit {
			tipCommits = append(tipCommits, p)
		} else {
			tipOther = append(tipOther, p)
		}
	}

	// Commit targets: rev-list <targets> --not <tips>; whatever stays
	// interesting is unreachable.
	rw := newRevWalk(ctx, g, nil)
	var objTargets []object.ID
	var commitTargets []object.ID
	for _, id := range rest {
		if reachable.Has(id) {
			continue
		}
		typ, _, err := g.r.ReadObject(id)
		switch {
		case errors.Is(err, object.ErrNotFound):
			continue // unknown: reported below
		case err != nil:
			return nil, fmt.Errorf("target %s: %w", id, err)
		case typ == object.Commit:
			if err := rw.addTip(id, nil, false); err != nil {
				return nil, fmt.Errorf("target %s: %w", id, err)
			}
			commitTargets = append(commitTargets, id)
		case typ == object.Tree || typ == object.Blob:
			objTargets = append(objTargets, id)
		}
		// Tags not in a tip's chain are unreachable: nothing points at tags
		// except refs and other tags.
	}
	if len(commitTargets) > 0 && len(tipCommits) > 0 {
		for _, p := range tipCommits {
			if err := rw.addTip(p.id, p.commit, true); err != nil {
				return nil, err
			}
		}
		if _, err := rw.run(); err != nil {
			return nil, err
		}
		for _, id := range commitTargets {
			if rw.nodes[rw.idx[id]].flags&fUninteresting != 0 {
				reachable.Add(id)
			}
		}
	}
	if len(objTargets) > 0 {
		if err := findObjects(ctx, g, tipCommits, tipOther, objTargets, reachable); err != nil {
			return nil, err
		}
	}
	for _, id := range rest {
		if !reachable.Has(id) {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// findObjects walks the trees of the tips' history until every target is
// found, adding those found to reachable.
func findObjects(ctx context.Context, g *Graph, commits, other []peeled, targets []object.ID, reachable *idSet) error {
	w := newObjWalk(ctx, g, Filter{})
	left := func() bool {
		for _, id := range targets {
			if !w.out.Has(id) {
				return true
			}
		}
		return false
	}
	for _, p := range other {
		if err := w.userGiven(p); err != nil {
			return err
		}
	}
	rw := newRevWalk(ctx, g, nil)
	for _, p := range commits {
		if err := rw.addTip(p.id, p.commit, false); err != nil {
			return err
		}
	}
	// An unlimited walk pops commits one at a time; stop as soon as the
	// last target turns up instead of walking the whole history.
	for left() && len(rw.heap) > 0 {
		i := rw.pop()
		if err := rw.expand(i); err != nil {
			return err
		}
		if err := w.rootTree(rw.nodes[i].c.Tree); err != nil {
			return err
		}
	}
	for _, id := range targets {
		if w.out.Has(id) {
			reachable.Add(id)
		}
	}
	return nil
}
