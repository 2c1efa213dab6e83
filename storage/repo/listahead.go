package repo

import (
	"context"
	"sync"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/refdb"
)

// ListAhead takes repositories' database listings ahead of their opens.
// A cold open reads the name index first (access is decided from it
// before anything opens), then lists the database, then reads it and
// places its fence: three sequential store round trips. The listing
// depends only on the name, so a front end starts it beside the index
// read (Start) and the open (Open) uses it instead of its own: two round
// trips.
//
// A listing is only ever used by an open; one for a repository the
// caller may not read, or that does not exist, is dropped (Discard) or
// expires unused, so a stranger causes no open and waits for nothing.
// Listings are not started for repositories open (or opening) through
// this node, which ListAhead learns from Open and Close. The zero of
// *ListAhead (nil) does nothing.
type ListAhead struct {
	store objstore.Store

	mu    sync.Mutex
	open  map[string]int           // by database prefix: Repos open or opening
	ahead map[string]*aheadListing // by database prefix
	wg    sync.WaitGroup           // listings in flight
}

type aheadListing struct {
	started time.Time
	done    chan struct{}
	l       *refdb.Listing // nil if the listing failed
}

const (
	// maxAheadAge: an older listing is not used. Any age is correct (see
	// refdb.OpenExistingListed), but an old one of a busy database makes
	// the fence chase the records written since.
	maxAheadAge = 2 * time.Second
	// maxAhead bounds the listings kept; past it none is started.
	maxAhead = 1024
)

// NewListAhead returns a ListAhead listing in s, which must be the store
// the repositories are opened from.
func NewListAhead(s objstore.Store) *ListAhead {
	return &ListAhead{store: s, open: map[string]int{}, ahead: map[string]*aheadListing{}}
}

// Start lists r's database in the background for the next Open of it,
// unless it is open here or a listing of it is pending. It never waits.
func (a *ListAhead) Start(r names.Repo) {
	if a == nil {
		return
	}
	prefix := dbPrefix(r)
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open[prefix] > 0 {
		return
	}
	if p := a.ahead[prefix]; p != nil && now.Sub(p.started) < maxAheadAge {
		return
	}
	if len(a.ahead) >= maxAhead {
		for k, p := range a.ahead {
			if now.Sub(p.started) >= maxAheadAge {
				delete(a.ahead, k)
			}
		}
		if len(a.ahead) >= maxAhead {
			return
		}
	}
	p := &aheadListing{started: now, done: make(chan struct{})}
	a.ahead[prefix] = p
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(p.done)
		// Not the request's context: the open that uses the listing
		// outlives the request that started it only when it runs.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.l, _ = refdb.List(ctx, a.store, prefix) // a failed listing is listed again by the open
	}()
}

// Discard drops r's pending listing (the name index says the repository
// does not exist under that spelling).
func (a *ListAhead) Discard(r names.Repo) {
	if a == nil {
		return
	}
	a.mu.Lock()
	delete(a.ahead, dbPrefix(r))
	a.mu.Unlock()
}

// Wait returns once no listing is in flight.
func (a *ListAhead) Wait() {
	if a != nil {
		a.wg.Wait()
	}
}

// opening records that r is being opened and returns its pending
// listing, once taken, if a fresh one is there (nil otherwise).
func (a *ListAhead) opening(ctx context.Context, r names.Repo) *refdb.Listing {
	if a == nil {
		return nil
	}
	prefix := dbPrefix(r)
	a.mu.Lock()
	a.open[prefix]++
	p := a.ahead[prefix]
	delete(a.ahead, prefix)
	a.mu.Unlock()
	if p == nil || time.Since(p.started) >= maxAheadAge {
		return nil
	}
	select {
	case <-p.done:
		return p.l
	case <-ctx.Done():
		return nil
	}
}

// closed records that an opening of r failed or its Repo closed.
func (a *ListAhead) closed(r names.Repo) {
	if a == nil {
		return
	}
	prefix := dbPrefix(r)
	a.mu.Lock()
	if a.open[prefix]--; a.open[prefix] <= 0 {
		delete(a.open, prefix)
	}
	a.mu.Unlock()
}
