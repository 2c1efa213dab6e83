package api

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rgit/rgit/storage/object"
)

// TestBlobAnswer: text stays UTF-8 (a cap never splits a character),
// binary goes base64, and the cap sets truncated.
func TestBlobAnswer(t *testing.T) {
	id := object.MustID(oidA)
	cases := []struct {
		name              string
		data              string
		limit             int
		binary, truncated bool
		content           string
	}{
		{"text", "hello\n", 10, false, false, "hello\n"},
		{"nul is binary", "a\x00b", 10, true, false, base64.StdEncoding.EncodeToString([]byte("a\x00b"))},
		{"bad utf-8 is binary", "a\xffb", 10, true, false, base64.StdEncoding.EncodeToString([]byte("a\xffb"))},
		{"capped", "abcdef", 4, false, true, "abcd"},
		{"cap inside a character", "ab€", 4, false, true, "ab"},
	}
	for _, c := range cases {
		a := newBlobAnswer(id, []byte(c.data), c.limit)
		if a.Binary != c.binary || a.Truncated != c.truncated || a.Content != c.content || a.Size != int64(len(c.data)) {
			t.Errorf("%s: %+v", c.name, a)
		}
		if !a.Binary && !utf8.ValidString(a.Content) {
			t.Errorf("%s: content is not UTF-8", c.name)
		}
	}
	// Text longer than the cap is judged by its kept part's characters.
	long := strings.Repeat("€", DefaultBlobCap)
	if a := newBlobAnswer(id, []byte(long), DefaultBlobCap); a.Binary || !a.Truncated || !utf8.ValidString(a.Content) {
		t.Errorf("long text: binary %v truncated %v", a.Binary, a.Truncated)
	}
}

// TestParsePerson: signatures as git writes them, and damaged ones shown
// as they are rather than failing the answer.
func TestParsePerson(t *testing.T) {
	for in, want := range map[string]person{
		"A U Thor <a@x> 1700000000 +0130": {"A U Thor", "a@x", "2023-11-14T23:43:20+01:30"},
		"B <b@x> 1700000000 -0500":        {"B", "b@x", "2023-11-14T17:13:20-05:00"},
		"C <c@x> notatime +0000":          {"C", "c@x", ""},
		"no email at all":                 {"no email at all", "", ""},
	} {
		if got := parsePerson([]byte(in)); got != want {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}
}

// TestSortsAfter: a lookup stops at the first entry past every place
// the name could be in git's tree order, where a tree's name sorts as if
// it ended in "/".
func TestSortsAfter(t *testing.T) {
	for _, c := range []struct {
		entry, name string
		after       bool
	}{
		{"netx", "net", true},    // "netx" > "net/"
		{"net.go", "net", false}, // "net.go" < "net/": a tree net follows
		{"net-a", "net", false},  // '-' < '/'
		{"net0", "net", true},    // '0' > '/'
		{"ne", "net", false},     // a prefix sorts first
		{"nes", "net", false},    // smaller byte
		{"o", "net", true},       // larger first byte
		{"net", "net", false},    // the name itself
		{"a", "", true},          // anything is after the empty name's places
		{"README", "src", false}, // upper case sorts first
		{"src", "README", true},
	} {
		if got := sortsAfter([]byte(c.entry), c.name); got != c.after {
			t.Errorf("sortsAfter(%q, %q) = %v, want %v", c.entry, c.name, got, c.after)
		}
	}
}
