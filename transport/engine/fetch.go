package engine

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/gitproto"
	"github.com/rgit/rgit/transport/pktline"
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

// PlanFetch computes the objects to send.
func (b *backend) PlanFetch(ctx context.Context, req gitproto.FetchRequest) (gitproto.FetchPlan, error) {
	var filter walk.Filter
	if req.Filter != "" {
		f, err := walk.ParseFilter(req.Filter)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", gitproto.ErrProtocol, err)
		}
		filter = f
	}
	wr := walk.Request{
		Wants: req.Wants, Haves: req.Haves, ClientShallow: req.ClientShallow,
		Depth: req.Depth, DeepenSince: req.DeepenSince, DeepenNot: req.DeepenNot,
		DeepenRelative: req.DeepenRelative, Filter: filter,
	}
	if req.IncludeTag {
		for _, r := range req.Snapshot.Refs {
			if !r.Peeled.IsZero() {
				wr.IncludeTags = append(wr.IncludeTags, walk.TagRef{Tag: r.ID, Peeled: r.Peeled})
			}
		}
	}
	res, err := walk.Objects(ctx, b.walkGraph(), wr)
	if err != nil {
		return nil, err
	}
	return &plan{b: b, req: req, res: res}, nil
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
	opts := pack.WriteOptions{OfsDelta: p.req.OfsDelta, Progress: progressFunc(progress)}
	// A shallow client may lack history under its haves, so it only gets
	// deltas against objects it is sent.
	if p.req.Thin && len(p.req.Haves) > 0 && len(p.req.ClientShallow) == 0 && !p.req.Deepen() {
		opts.Thin, opts.ClientHas = true, p.res.ClientHas
	}
	_, err := p.b.snap.Objects().WritePack(ctx, w, p.res.Objects, opts)
	return err
}

// progressFunc renders stage progress as git-style meters on w.
func progressFunc(w io.Writer) func(stage string, done, total uint64) {
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
