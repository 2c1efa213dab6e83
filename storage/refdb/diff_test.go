package refdb

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDiffMatchesKeyByKey: after random commits (sets, changes, removals,
// and a view rebuilt from scratch as a snapshot load does) Diff yields
// exactly the keys whose value differs, each once, within the prefix.
func TestDiffMatchesKeyByKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	state := map[string]string{}
	v := emptyView
	views := []*View{v}
	states := []map[string]string{maps.Clone(state)}
	for step := range 300 {
		var muts []mutation
		for range 1 + rng.IntN(8) {
			k := fmt.Sprintf("%s/%03d", []string{"own", "sess", "x"}[rng.IntN(3)], rng.IntN(120))
			if rng.IntN(4) == 0 {
				muts = append(muts, mutation{key: k, delete: true})
				delete(state, k)
			} else {
				val := fmt.Sprint(rng.IntN(3))
				muts = append(muts, mutation{key: k, value: []byte(val)})
				state[k] = val
			}
		}
		v = v.apply(uint64(step+1), muts)
		if step%97 == 0 { // a snapshot load: nothing shared with before
			b := newBuilder()
			for _, k := range slices.Sorted(maps.Keys(state)) {
				b.add(k, []byte(state[k]))
			}
			v = b.view(v.seq)
		}
		views = append(views, v)
		states = append(states, maps.Clone(state))
	}
	for range 400 {
		i, j := rng.IntN(len(views)), rng.IntN(len(views))
		for _, prefix := range []string{"", "own/", "sess/"} {
			var want []string
			for k := range keysOf(states[i], states[j]) {
				a, inA := states[i][k]
				b, inB := states[j][k]
				if (inA != inB || a != b) && len(k) >= len(prefix) && k[:len(prefix)] == prefix {
					want = append(want, k)
				}
			}
			got := slices.Collect(Diff(views[i], views[j], prefix))
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("Diff(view %d, view %d, %q) = %v, want %v", i, j, prefix, got, want)
			}
		}
	}
}

func keysOf(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestDiffSkipsSharedSubtrees: between views of a 100,000-key database
// 10 commits apart, Diff compares a few hundred nodes; between the same
// key sets built separately (nothing shared) it compares all of them.
func TestDiffSkipsSharedSubtrees(t *testing.T) {
	build := func() *View {
		b := newBuilder()
		for i := range 100_000 {
			b.add(fmt.Sprintf("own/%06d", i), []byte("v"))
		}
		return b.view(1)
	}
	old := build()
	v := old
	for i := range 10 {
		v = v.apply(uint64(i+2), []mutation{{key: fmt.Sprintf("own/%06d", i*9_001), value: []byte("w")}})
	}
	run := func(a, b *View) (changed []string, visits int) {
		d := differ{prefix: "own/", yield: func(k string) bool { changed = append(changed, k); return true }}
		d.diff(a.root, b.root)
		return changed, d.visits
	}
	changed, visits := run(old, v)
	if len(changed) != 10 || visits > 1_000 {
		t.Fatalf("10 commits apart: %d keys changed, %d nodes compared", len(changed), visits)
	}
	if changed, visits := run(old, build()); len(changed) != 0 || visits < 100_000 {
		t.Fatalf("nothing shared: %d keys changed, %d nodes compared", len(changed), visits)
	}
}
