package gitproto

import (
	"slices"
	"strings"
	"testing"
)

// TestPackURIProtocols: a packfile-uris argument keeps its distinct
// non-empty schemes, in order, and no more than maxPackURIProtocols of
// them however long the line.
func TestPackURIProtocols(t *testing.T) {
	cases := map[string][]string{
		"https":                     {"https"},
		"http,https":                {"http", "https"},
		"https,,https,http,":        {"https", "http"},
		"":                          nil,
		strings.Repeat("x,", 60000): {"x"},
	}
	for in, want := range cases {
		if got := packURIProtocols(in); !slices.Equal(got, want) {
			t.Errorf("packURIProtocols(%.40q) = %q, want %q", in, got, want)
		}
	}
	var many []string
	for i := range 100 {
		many = append(many, strings.Repeat("s", i+1))
	}
	if got := packURIProtocols(strings.Join(many, ",")); len(got) != maxPackURIProtocols {
		t.Errorf("%d schemes kept of 100, want %d", len(got), maxPackURIProtocols)
	}
}
