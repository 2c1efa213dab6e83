package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/walk"
)

// What the read API may show is what a fetch may ask for: the objects
// reachable from the refs now. That set is computed once per pack set and
// ref tips, from the reachability bitmaps (storage/bitmap.Reachable: the
// stored masks, plus a walk of the packs outside the bitmap stack), and
// shared by every request until a push or a maintenance switch changes
// either; a request then costs one lookup.

// reachTimeout bounds one computation, which no request owns.
const reachTimeout = 5 * time.Minute

// reachGraphCommits bounds the commit cache of a computation: the fill
// reads each commit once, so a cache buys nothing.
const reachGraphCommits = 1024

// reachEntry is the reachable set of one list of tips, being computed
// until done is closed.
type reachEntry struct {
	key  string
	done chan struct{}
	r    *bitmap.Reach
	err  error
}

// failed reports whether the entry finished with an error.
func (e *reachEntry) failed() bool {
	select {
	case <-e.done:
		return e.err != nil
	default:
		return false
	}
}

// tipsKey identifies the state's distinct ref tips (a digest of them,
// sorted), computed once per state.
func (st *state) tipsKey() string {
	st.tipsOnce.Do(func() {
		tips := refTips(st.refs)
		slices.SortFunc(tips, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
		h := sha256.New()
		for _, id := range tips {
			h.Write(id[:])
		}
		st.tips = string(h.Sum(nil))
	})
	return st.tips
}

// Reachable returns the objects reachable from the snapshot's refs. The
// set is shared by every snapshot of the same packs and ref tips; the
// first caller starts its computation, which runs detached from any
// request (a caller that leaves wastes nothing, and one computation
// serves all), and ctx bounds only the wait. A failed computation is
// tried again by the next caller. Valid until Close.
func (s *Snapshot) Reachable(ctx context.Context) (*bitmap.Reach, error) {
	key := s.st.tipsKey()
	set := s.set
	set.reachMu.Lock()
	e := set.reach
	if e == nil || e.key != key || e.failed() {
		e = &reachEntry{key: key, done: make(chan struct{})}
		set.reach = e
		set.acquire() // the packs stay while the computation reads them
		go func() {
			defer set.release()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reachTimeout)
			defer cancel()
			e.r, e.err = bitmap.Reachable(ctx, s.Bitmap(ctx), set.set, walk.NewGraph(set.set, reachGraphCommits), refTips(s.Refs))
			close(e.done)
		}()
	}
	set.reachMu.Unlock()
	if err := ctx.Err(); err != nil {
		// Given up already: the computation goes on for later callers,
		// but this one gets its error even if the set is ready.
		return nil, err
	}
	select {
	case <-e.done:
		if e.err != nil {
			return nil, fmt.Errorf("objects reachable in %s: %w", s.Repo, e.err)
		}
		return e.r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
