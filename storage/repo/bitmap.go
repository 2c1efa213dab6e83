package repo

// Reachability bitmaps (storage/bitmap): whole ones for packs that hold a
// whole repository (the pack a repack writes, the first pack pushed into
// an empty repository), and layers for the packs background roll-ups
// write, over the packs they leave in place. A bitmap lives next to its
// pack in the store ("pack-<hash>.bitmap") and in the node's pack cache.
//
// Whether a pack has a bitmap is not recorded in the database: the pack
// cache asks the store the first time a fetch wants the bitmap of an opened
// pack and remembers the answer while the pack stays open. That needs no
// write through the repo actor and no extra state for fork, GC or delete to
// keep consistent (they treat the bitmap as one more file of the pack). The
// only case a lookup cannot see, a bitmap built after this node looked, is
// covered on the building node by adopting the file into its cache; that
// node owns the repository and so serves its fetches. Other nodes use it
// the next time they open the pack.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// bitmapBuildTimeout bounds a background build, so a stuck store cannot
// keep a repository's build slot forever.
const bitmapBuildTimeout = 30 * time.Minute

// BuildBitmap computes the bitmap of the stored pack packName for a
// repository whose refs point at tips, uploads it next to the pack and
// installs it in the local cache. It fails with an error wrapping
// bitmap.ErrIncomplete if the tips reach objects outside the pack.
func BuildBitmap(ctx context.Context, d Deps, r names.Repo, packName string, tips []object.ID) error {
	if d.Cache == nil {
		return fmt.Errorf("bitmap of %s in %s: no pack cache configured", packName, r)
	}
	pk, ik := PackKeys(r, packName)
	p, release, err := d.Cache.Get(ctx, pk, ik, packName)
	if err != nil {
		return fmt.Errorf("bitmap of %s in %s: %w", packName, r, err)
	}
	defer release()
	start := time.Now()
	x, err := bitmap.Build(ctx, p, tips, bitmap.BuildOptions{})
	if err != nil {
		return fmt.Errorf("bitmap of %s in %s: %w", packName, r, err)
	}
	return storeBitmap(ctx, d, r, packName, x, start)
}

// BuildLayerBitmap gives the stored pack packName, a roll-up of the
// snapshot's packs named in rolled, a bitmap layered over the snapshot's
// other packs (bitmap.BuildLayer), so fetches keep answering from bitmaps
// after partial roll-ups instead of walking everything pushed since the
// last full repack. The layer goes over the snapshot's bitmap stack as far
// as that stack keeps no rolled pack, then the other remaining packs,
// largest first. Without a bitmap stack to stand on it builds nothing
// (it would walk the whole history for each roll-up; the full repack
// maintenance runs for a repository without bitmap brings one).
func BuildLayerBitmap(ctx context.Context, d Deps, snap *Snapshot, packName string, rolled []string) error {
	if d.Cache == nil {
		return nil
	}
	below := snap.Bitmap(ctx)
	if below == nil {
		return nil
	}
	start := time.Now()
	gone := make(map[string]bool, len(rolled))
	for _, n := range rolled {
		gone[n] = true
	}
	var packs []*pack.Pack
	var xs []*bitmap.Index
	kept := map[string]bool{}
	layers := below.Layers()
	for i, p := range below.Packs() {
		if gone[p.Name()] {
			break
		}
		packs, xs = append(packs, p), append(xs, layers[i])
		kept[p.Name()] = true
	}
	rest := slices.DeleteFunc(snap.Objects().Packs(), func(p *pack.Pack) bool { return gone[p.Name()] || kept[p.Name()] })
	slices.SortFunc(rest, func(a, b *pack.Pack) int {
		return cmp.Or(cmp.Compare(b.Index().Count(), a.Index().Count()), strings.Compare(a.Name(), b.Name()))
	})
	for _, p := range rest {
		packs, xs = append(packs, p), append(xs, nil)
	}
	pk, ik := PackKeys(snap.Repo, packName)
	p, release, err := d.Cache.Get(ctx, pk, ik, packName)
	if err != nil {
		return fmt.Errorf("bitmap layer of %s in %s: %w", packName, snap.Repo, err)
	}
	defer release()
	x, err := bitmap.BuildLayer(ctx, packs, xs, p, refTips(snap.Refs), bitmap.BuildOptions{})
	if err != nil {
		return fmt.Errorf("bitmap layer of %s in %s: %w", packName, snap.Repo, err)
	}
	return storeBitmap(ctx, d, snap.Repo, packName, x, start)
}

// storeBitmap uploads x, the bitmap of packName built since start, next
// to its pack and installs it in the local cache.
func storeBitmap(ctx context.Context, d Deps, r names.Repo, packName string, x *bitmap.Index, start time.Time) error {
	path, err := writeTemp(d.Cache.TempDir(), x)
	if err != nil {
		return fmt.Errorf("bitmap of %s in %s: %w", packName, r, err)
	}
	defer os.Remove(path) // no-op once adopted
	size, err := putFile(ctx, d, BitmapKey(r, packName), path)
	if err != nil {
		return fmt.Errorf("bitmap of %s in %s: %w", packName, r, err)
	}
	// Only an optimisation for the pack's current readers: without it the
	// cache downloads the bitmap when it next opens the pack.
	if err := d.Cache.AdoptBitmap(path, packName); err != nil {
		d.log().Warn("adopt bitmap into cache", zap.String("pack", packName), zap.Error(err))
	}
	d.log().Info("bitmap built", zap.Stringer("repo", r), zap.String("pack", packName),
		zap.Int("masks", x.Len()), zap.Int64("bytes", size), zap.Duration("took", time.Since(start)))
	return nil
}

func writeTemp(dir string, x *bitmap.Index) (string, error) {
	f, err := os.CreateTemp(dir, "bitmap-*")
	if err != nil {
		return "", fmt.Errorf("create temp bitmap: %w", err)
	}
	_, err = x.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// BitmapBuilds runs a node's background bitmap builds: at most one per
// repository at a time, all cancelled and waited for by Close so a node
// that stopped writes nothing more to the store.
type BitmapBuilds struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]bool
	closed  bool
}

// NewBitmapBuilds returns an empty group of builds.
func NewBitmapBuilds() *BitmapBuilds {
	ctx, cancel := context.WithCancel(context.Background())
	return &BitmapBuilds{ctx: ctx, cancel: cancel, running: map[string]bool{}}
}

// Start runs BuildBitmap on its own goroutine, detached from the caller's
// context (a push is acknowledged before its pack's bitmap exists), and
// reports whether it started: a request while the repository's build runs,
// or after Close, is dropped (the next repack builds one anyway). Failures
// are logged, never returned. done, if not nil, is called with the result
// when the build ends.
func (b *BitmapBuilds) Start(d Deps, r names.Repo, packName string, tips []object.ID, done func(error)) bool {
	job := r.String()
	b.mu.Lock()
	if b.closed || b.running[job] {
		b.mu.Unlock()
		return false
	}
	b.running[job] = true
	b.wg.Add(1)
	b.mu.Unlock()
	tips = append([]object.ID(nil), tips...)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, bitmapBuildTimeout)
		err := BuildBitmap(ctx, d, r, packName, tips)
		cancel()
		b.mu.Lock()
		delete(b.running, job)
		b.mu.Unlock()
		switch {
		case errors.Is(err, bitmap.ErrIncomplete):
			// Another push landed first and its refs reach past the pack.
			d.log().Info("no bitmap: pack is not the whole repository", zap.String("repo", job), zap.String("pack", packName), zap.Error(err))
		case err != nil:
			d.log().Warn("background bitmap build failed", zap.String("repo", job), zap.String("pack", packName), zap.Error(err))
		}
		if done != nil {
			done(err)
		}
	}()
	return true
}

// Close cancels the running builds and waits for them to end.
func (b *BitmapBuilds) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// refTips returns the distinct ids the refs point at.
func refTips(refs []Ref) []object.ID {
	tips := make([]object.ID, 0, len(refs))
	seen := make(map[object.ID]bool, len(refs))
	for _, ref := range refs {
		if !seen[ref.ID] {
			seen[ref.ID] = true
			tips = append(tips, ref.ID)
		}
	}
	return tips
}

// LargestPack returns the pack with the most objects (the first of
// equals): the one a whole-history bitmap belongs to until enough was
// pushed on top to warrant a repack. ok is false for no packs.
func LargestPack(packs []PackInfo) (largest PackInfo, ok bool) {
	if len(packs) == 0 {
		return PackInfo{}, false
	}
	return slices.MaxFunc(packs, func(a, b PackInfo) int { return cmp.Compare(a.Objects, b.Objects) }), true
}

// Bitmap returns the reachability bitmaps that answer the snapshot's
// fetches: of the stacks its packs' bitmaps form (bitmap.Choose), the one
// covering the most objects; nil when no pack has a usable bitmap (fetches
// then walk). The first call per opened pack may download its bitmap; the
// packs are asked in parallel. Valid until Close.
func (s *Snapshot) Bitmap(ctx context.Context) *bitmap.Stack {
	if s.set.cache == nil {
		return nil
	}
	packs := s.Objects().Packs()
	xs := make([]*bitmap.Index, len(packs))
	load := func(i int) {
		name := packs[i].Name()
		xs[i] = s.set.cache.Bitmap(ctx, BitmapKey(s.Repo, name), name)
	}
	if len(packs) == 1 {
		load(0)
	} else {
		var wg sync.WaitGroup
		for i := range packs {
			wg.Go(func() { load(i) })
		}
		wg.Wait()
	}
	chosen := bitmap.Choose(packs, xs)
	if kept := s.set.stack.Load(); kept.Same(chosen) {
		return kept
	}
	s.set.stack.Store(chosen)
	return chosen
}
