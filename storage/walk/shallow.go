package walk

import (
	"context"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// ErrNoShallowCommits is returned when deepen-since/deepen-not exclude
// every wanted commit (git: "no commits selected for shallow requests").
var ErrNoShallowCommits = errors.New("no commits selected for shallow requests")

// shallowPlan is how a request's shallow state changes the object walk,
// mirroring upload-pack's send_shallow_info: grafts cut history at the old
// and new shallow boundaries; an unshallowed commit becomes an extra have
// (the client has it) and its parents extra wants.
type shallowPlan struct {
	grafts             *idSet
	wants, haves       []object.ID
	shallow, unshallow []object.ID
}

func planShallow(ctx context.Context, g *Graph, req Request) (*shallowPlan, error) {
	deepenRevList := req.DeepenSince != 0 || len(req.DeepenNot) > 0
	if req.Depth < 0 {
		return nil, fmt.Errorf("deepen %d: negative depth", req.Depth)
	}
	if req.Depth > 0 && deepenRevList {
		return nil, ErrDeepenConflict
	}
	plan := &shallowPlan{}
	var client []object.ID
	clientSet := newIDSet(len(req.ClientShallow))
	for _, id := range req.ClientShallow {
		if _, err := g.Commit(id); err != nil {
			if errors.Is(err, object.ErrNotFound) {
				continue // git ignores shallow lines for objects it lacks
			}
			return nil, fmt.Errorf("invalid shallow object %s: %w", id, err)
		}
		if clientSet.Add(id) {
			client = append(client, id)
		}
	}
	if len(client) == 0 && req.Depth == 0 && !deepenRevList {
		return plan, nil
	}
	plan.grafts = newIDSet(len(client))

	var boundary []object.ID
	var notShallow *idSet
	var err error
	switch {
	case req.Depth == 0:
		if deepenRevList {
			boundary, notShallow, err = sinceBoundary(ctx, g, req)
		}
	case req.Depth >= InfiniteDepth && !req.DeepenRelative:
		notShallow = clientSet
	case req.DeepenRelative:
		boundary, notShallow, err = depthBoundary(ctx, g, client, req.Depth+1)
	default:
		boundary, notShallow, err = depthBoundary(ctx, g, req.Wants, req.Depth)
	}
	if err != nil {
		return nil, err
	}
	for _, id := range boundary {
		if !clientSet.Has(id) && !notShallow.Has(id) && plan.grafts.Add(id) {
			plan.shallow = append(plan.shallow, id)
		}
	}
	for _, id := range client {
		plan.grafts.Add(id)
		if notShallow == nil || !notShallow.Has(id) {
			continue
		}
		c, err := g.Commit(id)
		if err != nil {
			return nil, err
		}
		plan.unshallow = append(plan.unshallow, id)
		plan.wants = append(plan.wants, c.Parents...)
		plan.haves = append(plan.haves, id)
	}
	return plan, nil
}

// depthBoundary is git's get_shallow_commits: commits at distance
// depth-1 from heads (following parents, taking the shortest distance) are
// the boundary; commits closer than that are "not shallow". Heads that
// are not commits (after peeling tags) are ignored.
func depthBoundary(ctx context.Context, g *Graph, heads []object.ID, depth int) (boundary []object.ID, notShallow *idSet, err error) {
	type item struct {
		id object.ID
		c  *Commit
		d  int
	}
	notShallow = newIDSet(0)
	visited := newIDSet(0)
	var queue []item
	for _, h := range heads {
		p, err := g.peel(h)
		if err != nil {
			return nil, nil, fmt.Errorf("deepen from %s: %w", h, err)
		}
		if p.typ == object.Commit && visited.Add(p.id) {
			queue = append(queue, item{p.id, p.commit, 0})
		}
	}
	// Breadth first, so a commit's first visit is at its shortest distance.
	for k := 0; k < len(queue); k++ {
		if k%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		it := queue[k]
		if it.d+1 >= depth {
			boundary = append(boundary, it.id)
			continue
		}
		notShallow.Add(it.id)
		for _, pid := range it.c.Parents {
			if !visited.Add(pid) {
				continue
			}
			pc, err := g.Commit(pid)
			if err != nil {
				return nil, nil, fmt.Errorf("deepen: parent of %s: %w", it.id, err)
			}
			queue = append(queue, item{pid, pc, it.d + 1})
		}
	}
	return boundary, notShallow, nil
}

// sinceBoundary is git's get_shallow_commits_by_rev_list: the commits of
// `rev-list --max-age=<since> <wants> --not <deepen-not>` are kept, and
// those with a parent outside that set form the boundary.
func sinceBoundary(ctx context.Context, g *Graph, req Request) (boundary []object.ID, notShallow *idSet, err error) {
	rw := newRevWalk(ctx, g, nil)
	rw.since = req.DeepenSince
	for _, id := range req.DeepenNot {
		p, err := g.peel(id)
		if err != nil {
			if errors.Is(err, object.ErrNotFound) {
				continue
			}
			return nil, nil, fmt.Errorf("deepen-not %s: %w", id, err)
		}
		if p.typ == object.Commit {
			if err := rw.addTip(p.id, p.commit, true); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, id := range req.Wants {
		p, err := g.peel(id)
		if err != nil {
			return nil, nil, fmt.Errorf("want %s: %w", id, err)
		}
		if p.typ == object.Commit {
			if err := rw.addTip(p.id, p.commit, false); err != nil {
				return nil, nil, err
			}
		}
	}
	list, err := rw.run()
	if err != nil {
		return nil, nil, err
	}
	included := newIDSet(len(list))
	var kept []*rnode
	for _, i := range list {
		if n := &rw.nodes[i]; n.flags&fUninteresting == 0 {
			included.Add(n.id)
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil, nil, ErrNoShallowCommits
	}
	notShallow = newIDSet(len(kept))
	for _, n := range kept {
		border := false
		for _, p := range n.c.Parents {
			if !included.Has(p) {
				border = true
				break
			}
		}
		if border {
			boundary = append(boundary, n.id)
		} else {
			notShallow.Add(n.id)
		}
	}
	return boundary, notShallow, nil
}
