package walk

import (
	"context"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// IsAncestor reports whether anc is desc or one of its ancestors: git's
// test for a fast-forward (receive-pack's in_merge_bases). Both must be
// commits; an object of another type is not an ancestor of anything and
// has none (git calls such an update a "bad ref", never a fast-forward).
// The walk is exact: no date cutoff, so clock skew cannot fool it; it
// visits at most desc's history, each commit once, and stops at anc.
func IsAncestor(ctx context.Context, g *Graph, anc, desc object.ID) (bool, error) {
	for _, id := range []object.ID{anc, desc} {
		if _, err := g.Commit(id); errors.Is(err, ErrNotCommit) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("is-ancestor: %w", err)
		}
	}
	if anc == desc {
		return true, nil
	}
	seen := newIDSet(64)
	seen.Add(desc)
	queue := []object.ID{desc}
	for steps := 0; len(queue) > 0; steps++ {
		if steps%ctxCheckEvery == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		c, err := g.Commit(id)
		if err != nil {
			return false, fmt.Errorf("is-ancestor: %w", err)
		}
		for _, p := range c.Parents {
			if p == anc {
				return true, nil
			}
			if !seen.Has(p) {
				seen.Add(p)
				queue = append(queue, p)
			}
		}
	}
	return false, nil
}
