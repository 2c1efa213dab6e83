package engine

import (
	"context"
	"io"
	"sync"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/service/fetchpack"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// CheckWants allows ref tips and anything reachable from them.
func (b *backend) CheckWants(ctx context.Context, snap gitproto.RefSnapshot, wants []object.ID) error {
	tips := make(map[object.ID]bool, len(snap.Refs))
	var tipList []object.ID
	for _, r := range snap.Refs {
		tips[r.ID] = true
		tipList = append(tipList, r.ID)
	}
	var rest []object.ID
	for _, w := range wants {
		if !tips[w] {
			rest = append(rest, w)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	missing, err := walk.ReachableFrom(ctx, b.walkGraph(), tipList, rest)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &gitproto.NotOurRefError{ID: missing[0]}
	}
	return nil
}

func (b *backend) OkToGiveUp(ctx context.Context, wants, common []object.ID) bool {
	return walk.OkToGiveUp(ctx, b.walkGraph(), wants, common)
}

// PlanFetch computes the objects to send. A fetch that accepts pack URIs
// may get stored packs by URI (planPackURI; when it gets none, the plan of
// the objects it computed answers). A clone the clone-pack cache may
// answer defers the walk to WritePack, where it runs only on a miss.
func (b *backend) PlanFetch(ctx context.Context, req gitproto.FetchRequest) (gitproto.FetchPlan, error) {
	if p, err := b.planPackURI(ctx, &req); p != nil || err != nil {
		return p, err
	}
	if b.e.ClonePacks != nil && fetchpack.Cacheable(&req) {
		// Validate the filter now: the protocol reports it as a request
		// error, not a failure halfway through the pack.
		if _, err := fetchpack.WalkRequest(&req); err != nil {
			return nil, err
		}
		packs := make([]string, len(b.snap.Packs))
		for i, p := range b.snap.Packs {
			packs[i] = p.Name
		}
		return &cachedPlan{b: b, req: req, key: fetchpack.CacheKey(b.snap.Repo.String(), packs, &req)}, nil
	}
	res, err := b.planObjects(ctx, &req)
	if err != nil {
		return nil, err
	}
	return &plan{b: b, req: req, res: res}, nil
}

// planObjects computes the objects req must receive, from the reachability
// bitmap of the repository's largest pack when it has one (loaded once per
// node and pack by the pack cache, shared by every session), else by
// walking.
func (b *backend) planObjects(ctx context.Context, req *gitproto.FetchRequest) (*walk.Result, error) {
	return fetchpack.PlanWith(ctx, b.walkGraph(), b.snap.Bitmap(ctx), b.log(), req)
}

type plan struct {
	b   *backend
	req gitproto.FetchRequest
	res *walk.Result
}

func (p *plan) Shallow() []object.ID   { return p.res.Shallow }
func (p *plan) Unshallow() []object.ID { return p.res.Unshallow }
func (p *plan) Close() error           { return nil }

func (p *plan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	_, err := fetchpack.Write(ctx, p.b.snap.Objects(), w, &p.req, p.res, progressMeters(progress))
	return err
}

// cachedPlan is a clone served through the clone-pack cache. Clones have
// no shallow boundary to announce.
type cachedPlan struct {
	b   *backend
	req gitproto.FetchRequest
	key string
}

func (p *cachedPlan) Shallow() []object.ID   { return nil }
func (p *cachedPlan) Unshallow() []object.ID { return nil }
func (p *cachedPlan) Close() error           { return nil }

func (p *cachedPlan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	place := repo.ClonePackPrefix(p.b.snap.Repo)
	_, err := p.b.e.ClonePacks.ServeShared(ctx, p.key, place, w, func(tw io.Writer) error {
		res, err := p.b.planObjects(ctx, &p.req)
		if err != nil {
			return err
		}
		_, err = fetchpack.Write(ctx, p.b.snap.Objects(), tw, &p.req, res, progressMeters(progress))
		return err
	})
	return err
}

// progressMeters renders stage progress as git-style meters on w.
func progressMeters(w io.Writer) pack.ProgressFunc {
	if w == nil {
		return nil
	}
	var mu sync.Mutex
	var cur string
	var meter *pktline.Progress
	return func(stage string, done, total uint64) {
		mu.Lock()
		defer mu.Unlock()
		if stage != cur {
			meter.Done()
			cur, meter = stage, pktline.NewProgress(w, capitalize(stage), total)
		}
		meter.Set(done)
		if total > 0 && done == total {
			meter.Done()
		}
	}
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
