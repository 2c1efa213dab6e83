package api

import (
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// TestWalkMemo: facts are taken out whole and given back; of two walks
// of one key the larger result is kept; past the byte budget the oldest
// generation goes, and a result over a generation's budget is not kept.
func TestWalkMemo(t *testing.T) {
	facts := func(n int) map[object.ID]commitFacts {
		m := map[object.ID]commitFacts{}
		for i := range n {
			m[object.ID{byte(i), byte(i >> 8)}] = commitFacts{time: int64(i)}
		}
		return m
	}
	m := NewWalkMemo(10 * factBytes) // generations of 5 facts
	a, b, c := memoKey{1, "a"}, memoKey{1, "b"}, memoKey{2, "a"}
	take := func(k memoKey, want int, what string) {
		t.Helper()
		if got := len(m.take(k)); got != want {
			t.Errorf("%s: took %d facts of %v, want %d", what, got, k, want)
		}
	}
	take(a, 0, "empty memo")
	m.give(a, facts(4))
	take(a, 4, "given")
	take(a, 0, "taken twice")
	m.give(a, facts(4))
	m.give(a, facts(3)) // a walk that started from less
	take(a, 4, "the larger kept")
	m.give(a, facts(4))
	m.give(b, facts(4)) // a moves to the previous generation
	m.give(c, facts(4)) // b does, and a goes
	take(a, 0, "past the budget")
	take(b, 4, "the previous generation")
	m.give(b, facts(6))
	take(b, 0, "over a generation's budget")
	take(c, 4, "the current generation")
}
