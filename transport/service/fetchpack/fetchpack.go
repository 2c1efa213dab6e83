// Package fetchpack is the pack-producing half of upload-pack, shared by
// the server (transport/service/engine) and the benchmark (cmd/rgit-bench) so
// that what is measured is what is served: it turns a protocol fetch
// request into a reachability walk (storage/walk) and writes the pack for
// the result from the stored packs (storage/pack).
//
// With a reachability bitmap index (storage/bitmap) for the repository's
// pack, clones and incremental fetches are answered from the bitmaps
// instead of the walk; shallow and deepen requests, and anything else the
// bitmaps cannot answer exactly, still walk.
//
// It imports only storage/object, storage/walk, storage/pack,
// storage/bitmap, storage/clonecache (for cache keys), transport/wire/gitproto
// and zap; it knows nothing about actors or sessions.
package fetchpack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/clonecache"
	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// WalkRequest translates req into the walk's request. The error wraps
// gitproto.ErrProtocol for a malformed filter.
//
// The walk is sparse, as git's upload-pack is by default: an incremental
// fetch compares the sent and held trees path by path instead of reading
// the haves' whole trees.
func WalkRequest(req *gitproto.FetchRequest) (walk.Request, error) {
	wr := walk.Request{
		Wants: req.Wants, Haves: req.Haves, ClientShallow: req.ClientShallow,
		Depth: req.Depth, DeepenSince: req.DeepenSince, DeepenNot: req.DeepenNot,
		DeepenRelative: req.DeepenRelative, Sparse: true,
	}
	if req.Filter != "" {
		f, err := walk.ParseFilter(req.Filter)
		if err != nil {
			return wr, fmt.Errorf("%w: %v", gitproto.ErrProtocol, err)
		}
		wr.Filter = f
	}
	if req.IncludeTag {
		for _, r := range req.Snapshot.Refs {
			if !r.Peeled.IsZero() {
				wr.IncludeTags = append(wr.IncludeTags, walk.TagRef{Tag: r.ID, Peeled: r.Peeled})
			}
		}
	}
	return wr, nil
}

// Plan computes the objects req must receive.
func Plan(ctx context.Context, g *walk.Graph, req *gitproto.FetchRequest) (*walk.Result, error) {
	return PlanWith(ctx, g, nil, nil, req)
}

// PlanWith is Plan answered from reachability bitmaps where bm can: bm
// must stack packs of the repository g reads (nil: always walk). The
// bitmap result is exact (`git rev-list --objects`), so it may omit objects
// the sparse walk would resend. Requests bitmaps cannot answer walk; a
// bitmap that fails mid-query is logged to log (nil: not logged) and the
// request walks, so a bad bitmap costs time, never a wrong pack.
func PlanWith(ctx context.Context, g *walk.Graph, bm *bitmap.Stack, log *zap.Logger, req *gitproto.FetchRequest) (*walk.Result, error) {
	wr, err := WalkRequest(req)
	if err != nil {
		return nil, err
	}
	if bm != nil {
		res, err := bm.Objects(ctx, g, wr)
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, bitmap.ErrUnsupported) && log != nil:
			log.Warn("bitmap query failed, walking instead", zap.String("pack", bm.Pack().Name()), zap.Error(err))
		}
	}
	return walk.Objects(ctx, g, wr)
}

// OpenBitmap loads the bitmap file at path for p, alone in its stack. A
// missing file gives nil quietly; a corrupt or mismatched one, or a layer
// (it needs the packs below it), gives nil and a log line (log may be
// nil), so the caller walks.
func OpenBitmap(path string, p *pack.Pack, log *zap.Logger) *bitmap.Stack {
	bm, err := bitmap.Open(path, p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && log != nil {
			log.Warn("ignoring bitmap index", zap.String("path", path), zap.Error(err))
		}
		return nil
	}
	s := bitmap.Single(bm)
	if s == nil && log != nil {
		log.Warn("ignoring bitmap layer: its base packs are not open", zap.String("path", path))
	}
	return s
}

// Options returns the pack options for res, planned for req. progress
// receives stage meters (nil: none).
func Options(req *gitproto.FetchRequest, res *walk.Result, progress pack.ProgressFunc) pack.WriteOptions {
	opts := pack.WriteOptions{OfsDelta: req.OfsDelta, Progress: progress}
	// A shallow client may lack history under its haves, so it only gets
	// deltas against objects it is sent.
	if req.Thin && len(req.Haves) > 0 && len(req.ClientShallow) == 0 && !req.Deepen() {
		opts.Thin, opts.ClientHas = true, res.ClientHas
	}
	return opts
}

// Write streams the pack for res to w from set.
func Write(ctx context.Context, set *pack.Set, w io.Writer, req *gitproto.FetchRequest, res *walk.Result, progress pack.ProgressFunc) (pack.WriteStats, error) {
	st, err := set.WritePack(ctx, w, res.Objects, Options(req, res, progress))
	if err != nil {
		return st, fmt.Errorf("write pack of %d objects: %w", len(res.Objects), err)
	}
	return st, nil
}

// Cacheable reports whether req's pack depends only on the repository's
// pack list and the request itself, so a cached copy may answer it: a
// clone without haves or shallow state. (A pack list names immutable
// packs, so it fixes every object the walk can reach.)
func Cacheable(req *gitproto.FetchRequest) bool {
	return len(req.Haves) == 0 && len(req.ClientShallow) == 0 && !req.Deepen()
}

// CacheKey names the pack of a Cacheable request on repository repo with
// the given pack list: everything that shapes the pack is in it, the
// clone-pack version (format.ClonePack) first, so a release that shapes
// packs differently finds none of another's.
func CacheKey(repo string, packs []string, req *gitproto.FetchRequest) string {
	parts := []string{"fetchpack/v" + strconv.FormatUint(uint64(format.ClonePack.Write), 10), repo, strconv.Itoa(len(packs))}
	parts = append(parts, slices.Sorted(slices.Values(packs))...)
	wants := make([]string, len(req.Wants))
	for i, w := range req.Wants {
		wants[i] = w.String()
	}
	slices.Sort(wants)
	wants = slices.Compact(wants)
	parts = append(parts, strconv.Itoa(len(wants)))
	parts = append(parts, wants...)
	parts = append(parts, "ofs="+strconv.FormatBool(req.OfsDelta), "filter="+req.Filter, "include-tag="+strconv.FormatBool(req.IncludeTag))
	if req.IncludeTag {
		// Which tags ride along depends on the advertised refs too.
		var tags []string
		for _, r := range req.Snapshot.Refs {
			if !r.Peeled.IsZero() {
				tags = append(tags, r.ID.String()+">"+r.Peeled.String())
			}
		}
		slices.Sort(tags)
		parts = append(parts, tags...)
	}
	return clonecache.Key(parts...)
}
