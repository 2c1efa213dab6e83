package web

import (
	"slices"
	"testing"
)

// TestSegments: a hit's text cut at its matches; ranges that do not fit
// are dropped, never a panic.
func TestSegments(t *testing.T) {
	for _, c := range []struct {
		name   string
		text   string
		ranges [][2]int
		want   []seg
	}{
		{"none", "abc", nil, []seg{{Text: "abc"}}},
		{"empty text", "", nil, []seg{{Text: ""}}},
		{"middle", "a needle b", [][2]int{{2, 8}}, []seg{{Text: "a "}, {Text: "needle", Mark: true}, {Text: " b"}}},
		{"whole", "needle", [][2]int{{0, 6}}, []seg{{Text: "needle", Mark: true}}},
		{"adjacent", "abab", [][2]int{{0, 2}, {2, 4}}, []seg{{Text: "ab", Mark: true}, {Text: "ab", Mark: true}}},
		{"overlapping dropped", "abcdef", [][2]int{{0, 3}, {2, 4}, {4, 5}}, []seg{{Text: "abc", Mark: true}, {Text: "d"}, {Text: "e", Mark: true}, {Text: "f"}}},
		{"out of bounds dropped", "abc", [][2]int{{1, 9}, {-1, 1}, {2, 2}}, []seg{{Text: "abc"}}},
		{"markup stays text", "<b>x</b>", [][2]int{{3, 4}}, []seg{{Text: "<b>"}, {Text: "x", Mark: true}, {Text: "</b>"}}},
	} {
		if got := segments(c.text, c.ranges); !slices.Equal(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
