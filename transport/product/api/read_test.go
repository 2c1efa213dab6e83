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
