package walk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rgit/rgit/storage/object"
)

// NewCommits is what a ref update brought: the commits reachable from tip
// and from none of exclude (git rev-list tip --not exclude...), newest
// first by committer time.
type NewCommits struct {
	// IDs are the first commits of the list, at most the limit asked for.
	IDs []object.ID
	// Truncated: the list has more commits than IDs, or the walk's budget
	// ran out before it was complete (Exhausted: then IDs may also be
	// missing commits, or hold one an exclude tip reaches further down).
	Truncated, Exhausted bool
	// Descends reports that tip descends from exclude[0] (it is that
	// commit or a descendant): the update was a fast-forward. Exact when
	// the walk completed; when the budget ran out before the walk met
	// exclude[0], false.
	Descends bool
}

// ListNewCommits walks tip --not exclude within budget commits popped
// (at least 1) and returns at most limit of them. Annotated tags are
// peeled; a tip that is not a commit brought none. An exclude tip that is
// missing or not a commit excludes nothing (a deleted branch's commit may
// be gone), as git's gentle parsing of uninteresting tips.
func ListNewCommits(ctx context.Context, g *Graph, tip object.ID, exclude []object.ID, limit, budget int) (NewCommits, error) {
	var out NewCommits
	if tip.IsZero() {
		return out, nil
	}
	p, err := g.peel(tip)
	if err != nil {
		return out, fmt.Errorf("new commits of %s: %w", tip, err)
	}
	if p.typ != object.Commit {
		return out, nil
	}
	w := newRevWalk(ctx, g, nil)
	w.maxSteps = max(budget, 1)
	var first object.ID // exclude[0] peeled to its commit
	for i, id := range exclude {
		if id.IsZero() {
			continue
		}
		x, err := g.peel(id)
		if errors.Is(err, object.ErrNotFound) || (err == nil && x.typ != object.Commit) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("new commits of %s: exclude %s: %w", tip, id, err)
		}
		if i == 0 {
			first = x.id
		}
		if err := w.addTip(x.id, x.commit, true); err != nil {
			return out, fmt.Errorf("new commits of %s: exclude %s: %w", tip, id, err)
		}
	}
	if err := w.addTip(p.id, p.commit, false); err != nil {
		return out, fmt.Errorf("new commits of %s: %w", tip, err)
	}
	list, err := w.run()
	if err != nil {
		return out, err
	}
	out.Truncated, out.Exhausted = w.exhausted, w.exhausted
	out.Descends = !first.IsZero() && p.id == first
	for _, i := range list {
		n := &w.nodes[i]
		if n.flags&fUninteresting != 0 {
			continue
		}
		if !first.IsZero() && slices.Contains(w.parents(n), first) {
			out.Descends = true
		}
		if len(out.IDs) == limit {
			out.Truncated = true
			continue
		}
		out.IDs = append(out.IDs, n.id)
	}
	return out, nil
}
