package pack

import (
	"slices"
	"testing"
)

// The radix sort behind entry ends must agree with a plain sort by offset.
func TestSortByOffset(t *testing.T) {
	f := sharedFixture(t)
	idx, err := OpenIndex(f.idxPath)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	n := idx.Count()
	got := make([]uint32, n)
	for i := range got {
		got[i] = uint32(n - 1 - i) // any starting permutation
	}
	sortByOffset(idx, got)
	want := make([]uint32, n)
	for i := range want {
		want[i] = uint32(i)
	}
	slices.SortFunc(want, func(a, b uint32) int { return cmpInt64(idx.Offset(int(a)), idx.Offset(int(b))) })
	if !slices.Equal(got, want) {
		t.Fatalf("radix order differs from the comparison sort over %d objects", n)
	}
}
