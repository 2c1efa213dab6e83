package repo

// Geometric repacking: every push adds one pack, and a roll-up merges the
// smallest packs whenever the list stops being a geometric progression, so
// a repository with N objects keeps O(log N) packs and each object is
// rewritten O(log N) times over its life (git repack --geometric).

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// GeometricFactor is the progression rolled-up packs keep: each pack holds
// at least this many times the objects of the next smaller one.
const GeometricFactor = 2

// PlanGeometric returns the names of the packs to roll up into one so that
// the packs form a geometric progression with the given factor, or nil if
// they already do. It is git's repack --geometric split, weighing packs by
// object count: sorted by size, the largest packs that already form a
// progression stay; everything below them is rolled up, and so is any of
// the large packs the rolled-up pack would no longer be factor times
// smaller than.
//
//	objects          factor  roll up
//	100 50 25 12     2       nothing (already a progression)
//	100 1 1 1 1      2       the four 1s (4 < 100/2)
//	10 3 3           2       everything (3+3 = 6 > 10/2)
//	100 60 1         2       everything (100 < 2·60 breaks it at the top)
func PlanGeometric(packs []PackInfo, factor int) []string {
	if len(packs) < 2 || factor < 2 {
		return nil
	}
	sorted := slices.Clone(packs)
	slices.SortFunc(sorted, func(a, b PackInfo) int {
		return cmp.Or(cmp.Compare(a.Objects, b.Objects), cmp.Compare(a.Name, b.Name))
	})
	weight := func(p PackInfo) int64 { return max(int64(p.Objects), 1) }
	// From the largest end, find the first pair that breaks the progression;
	// it and everything below it is rolled up.
	split := 0
	for i := len(sorted) - 1; i > 0; i-- {
		if weight(sorted[i]) < int64(factor)*weight(sorted[i-1]) {
			split = i + 1
			break
		}
	}
	var total int64
	for _, p := range sorted[:split] {
		total += weight(p)
	}
	// The new pack must itself stay factor times below the next larger one.
	for split > 0 && split < len(sorted) && weight(sorted[split]) < int64(factor)*total {
		total += weight(sorted[split])
		split++
	}
	if split < 2 {
		return nil
	}
	names := make([]string, split)
	for i, p := range sorted[:split] {
		names[i] = p.Name
	}
	slices.Sort(names)
	return names
}

// BuildRollUp writes every object of the snapshot's packs named in names
// (see PlanGeometric) into one new pack, copying stored bytes, uploads it
// and returns it unlisted; CommitRepack switches to it. No reachability
// walk and no object dropped: the new pack holds exactly the union of the
// old ones, so the switch need not check the refs, only that those packs
// are still listed. When the roll-up takes every pack, the new pack is the
// whole repository and gets a bitmap, as a full repack's does; otherwise
// it gets a bitmap layer over the packs it leaves (BuildLayerBitmap). A
// crash before the switch leaves an unlisted pack that GC deletes.
func BuildRollUp(ctx context.Context, d Deps, snap *Snapshot, names []string, progress pack.ProgressFunc) (*RepackBuild, error) {
	return buildRollUp(ctx, d, snap, names, false, progress)
}

// BuildFullRollUp is the occasional full repack of background maintenance:
// a roll-up of every pack (nothing dropped, so a push meanwhile cannot
// make its switch fail, however long the build) with deltas searched
// afresh (git repack -f; pack.Set.WriteRepackDeltas) instead of copied,
// which turns the deltas each push happened to bring into chains chosen
// over the whole history, and with a bitmap. The search is bounded by
// Deps.FreshDeltaBudget; past it the roll-up reuses stored deltas. Dropping
// unreachable objects is the admin repack's job (BuildRepack).
func BuildFullRollUp(ctx context.Context, d Deps, snap *Snapshot, progress pack.ProgressFunc) (*RepackBuild, error) {
	names := make([]string, len(snap.Packs))
	for i, p := range snap.Packs {
		names[i] = p.Name
	}
	return buildRollUp(ctx, d, snap, names, true, progress)
}

func buildRollUp(ctx context.Context, d Deps, snap *Snapshot, names []string, fresh bool, progress pack.ProgressFunc) (*RepackBuild, error) {
	fail := func(err error) (*RepackBuild, error) {
		return nil, fmt.Errorf("roll up packs of %s: %w", snap.Repo, err)
	}
	if len(names) < 2 {
		return nil, nil
	}
	chosen := make(map[string]bool, len(names))
	for _, n := range names {
		chosen[n] = true
	}
	var packs []*pack.Pack
	var count int
	for _, p := range snap.Objects().Packs() {
		if chosen[p.Name()] {
			packs = append(packs, p)
			count += p.Index().Count()
		}
	}
	if len(packs) != len(chosen) {
		return fail(fmt.Errorf("%d of the %d packs to roll up are not in the snapshot", len(chosen)-len(packs), len(chosen)))
	}
	ids := make([]object.ID, 0, count)
	for _, p := range packs {
		x := p.Index()
		for i := range x.Count() {
			ids = append(ids, x.ID(i))
		}
	}
	// Over the chosen packs only, so every delta base comes from the
	// rolled-up set (a push's pack carries its bases) and is copied. A
	// roll-up of every pack is the whole repository: it gets a bitmap;
	// any other gets a layer over the packs it leaves.
	whole := len(names) == len(snap.Packs) && len(snap.Refs) > 0
	var search *pack.DeltaSearchOptions
	if fresh {
		// Path names from the refs' trees sort versions of a file
		// together; unreachable objects sort by size alone.
		res, err := reachable(ctx, snap)
		if err != nil {
			return fail(err)
		}
		names, err := pathHashes(ctx, snap.Objects(), res)
		if err != nil {
			return fail(err)
		}
		search = &pack.DeltaSearchOptions{NameHash: names, Progress: progress}
		// The walk's order first (recency: the search's tie-break), then
		// the unreachable rest; the writer keeps each object's first.
		ids = append(slices.Clip(res.Objects), ids...)
	}
	info, err := writePack(ctx, d, snap, pack.NewSet(packs...), ids, search, whole, progress)
	if err != nil {
		return fail(err)
	}
	if !whole {
		// Before the switch lists the pack, as a whole one's bitmap is.
		if err := BuildLayerBitmap(ctx, d, snap, info.Name, names); err != nil {
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			d.log().Warn("no bitmap layer for the rolled-up pack", zap.Stringer("repo", snap.Repo),
				zap.String("pack", info.Name), zap.Error(err))
		}
	}
	b := &RepackBuild{Repo: snap.Repo, Pack: info, rollUp: true, replaced: map[string][]byte{}}
	for _, n := range names {
		if n != info.Name {
			b.replaced[n] = snap.st.packRaw[n]
		}
	}
	return b, nil
}
