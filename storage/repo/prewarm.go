package repo

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/rgit/rgit/storage/names"
)

// Prewarm fetches owner/name's packs, indexes and bitmaps into the pack
// cache, so the first fetch after the repository moved to this node does
// not download them. The pack with the most objects (the bottom of the
// bitmap stack fetches start from) goes first, then the others largest
// first; a pack that would take the total past budget bytes is skipped
// (budget ≤ 0: no bound). It returns the pack and index bytes now local
// (packs already cached count too) and stops at the first error.
func Prewarm(ctx context.Context, d Deps, r names.Repo, budget int64) (int64, error) {
	packs, err := ReadPacks(ctx, d, r)
	if err != nil {
		return 0, fmt.Errorf("prewarm: %w", err)
	}
	largest, _ := LargestPack(packs)
	bm := largest.Name
	slices.SortFunc(packs, func(a, b PackInfo) int {
		if (a.Name == bm) != (b.Name == bm) {
			if a.Name == bm {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.Size, a.Size)
	})
	var total int64
	for _, p := range packs {
		size := p.Size + p.IdxSize
		if budget > 0 && total+size > budget {
			continue
		}
		packKey, idxKey := PackKeys(r, p.Name)
		_, release, err := d.Cache.Get(ctx, packKey, idxKey, p.Name)
		if err != nil {
			return total, fmt.Errorf("prewarm %s: %w", r, err)
		}
		// Loaded once per opened pack and kept with it; nil (no bitmap)
		// is fine, fetches walk from the bitmaps of the others.
		d.Cache.Bitmap(ctx, BitmapKey(r, p.Name), p.Name)
		release()
		total += size
	}
	return total, nil
}
