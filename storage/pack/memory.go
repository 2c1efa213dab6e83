package pack

import "math"

// What IndexPack holds beyond its fixed buffers (the pipe's, the kept
// deltas', the resolvers' frame budget) is decided by the sizes a pack
// declares, which an attacker chooses: a delta of a few bytes may declare
// a result of gigabytes. The estimates here, from those declarations and
// before anything is inflated, are what IndexOptions.Reserve is asked
// for.

// resolveMemory is what pass 2 may hold at once beyond its frame budget.
// Each of threads resolvers applies one delta at a time and holds its
// base, the delta and the result, so at most the 2×threads largest
// objects pass 2 materializes (largest: their sizes, from a topSizes of
// 2×threads) and threads times its largest delta. When every object is
// small enough for the fixed buffers (maxPipedCheck), nothing more: 0.
//
//	largest        maxDelta  threads  → need
//	[]             0         2          0
//	[1 MiB, 4 KiB] 2 KiB     1          0 (small objects)
//	[96M, 16M]     300       1          112M+300
//	[96M, 96M,     300       2          96M+96M+16M+16M+600
//	 16M, 16M]
func resolveMemory(threads int, largest []int64, maxDelta int64) int64 {
	if len(largest) == 0 || (largest[0] <= maxPipedCheck && maxDelta <= maxPipedCheck) {
		return 0
	}
	var n int64
	for _, v := range largest {
		n = satAdd(n, v)
	}
	for range threads {
		n = satAdd(n, maxDelta)
	}
	return n
}

// topSizes keeps the k largest sizes added, largest first.
type topSizes struct {
	k int
	v []int64
}

func (t *topSizes) add(x int64) {
	if t.k <= 0 || (len(t.v) == t.k && x <= t.v[len(t.v)-1]) {
		return
	}
	i := len(t.v)
	for i > 0 && t.v[i-1] < x {
		i--
	}
	if len(t.v) < t.k {
		t.v = append(t.v, 0)
	}
	copy(t.v[i+1:], t.v[i:])
	t.v[i] = x
}

// satAdd adds non-negative sizes, saturating: declared sizes go up to
// 2^63-1 each.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// resolveNeed is resolveMemory for the pass 2 that resolves the trees
// below roots (then the thin bases, one at a time).
func (ix *indexer) resolveNeed(roots []int32) int64 {
	threads := min(ix.opts.Threads, max(len(roots), 1))
	top := topSizes{k: 2 * threads}
	var maxDelta int64
	for _, r := range roots {
		top.add(ix.entries[r].objSize)
	}
	for i := range ix.entries {
		if e := &ix.entries[i]; e.rtype == 0 {
			top.add(e.objSize)
			maxDelta = max(maxDelta, e.dataSize)
		}
	}
	top.add(ix.maxThinBase)
	return resolveMemory(threads, top.v, maxDelta)
}
