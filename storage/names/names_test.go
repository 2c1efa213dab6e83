package names

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", MaxLen)
	for _, tc := range []struct {
		owner, name string
		ok          bool
	}{
		{"alice", "priv", true},
		{"Alice", "My.Repo_1-x", true},
		{"a", long, true},
		{"a", long + "b", false},
		{"", "x", false},
		{"alice", "", false},
		{"alice", ".", false},
		{"alice", "..", false},
		{".", "x", false},
		{"alice", "...", true},
		{"alice", "x.git", false},
		{"alice", "x.lock", false},
		{"alice", "x/y", false},
		{"alice", "x y", false},
		{"alice", "é", false},
		{"alice", "x\x00", false},
		{"api", "x", false},
		{"API", "x", false},
		{"Api", "x", false},
		{"apis", "x", true},
		{"alice", "api", true},
	} {
		err := Validate(tc.owner, tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q, %q) = %v, want ok=%v", tc.owner, tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q, %q) = %v, not ErrInvalid", tc.owner, tc.name, err)
		}
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		owner, raw, name string
		ok               bool
	}{
		{"alice", "priv.git", "priv", true},
		{"alice", "priv", "priv", true},
		{"alice", "priv.git.git", "", false}, // "priv.git" is not a valid name
		{"alice", ".git", "", false},
		{"API", "x.git", "", false},
	} {
		r, err := Clean(tc.owner, tc.raw)
		if (err == nil) != tc.ok || r.Name() != tc.name {
			t.Errorf("Clean(%q, %q) = %q, %v; want %q ok=%v", tc.owner, tc.raw, r.Name(), err, tc.name, tc.ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, owner, name string
		ok              bool
	}{
		{"alice/priv", "alice", "priv", true},
		{"alice/priv.git", "alice", "priv", true},
		{"API/x", "", "", false},
		{"alice", "", "", false},
		{"alice/x/y", "", "", false},
	} {
		r, err := Parse(tc.in)
		if (err == nil) != tc.ok || r.Owner() != tc.owner || r.Name() != tc.name {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q ok=%v", tc.in, r.Owner(), r.Name(), err, tc.owner, tc.name, tc.ok)
		}
	}
}

func TestFold(t *testing.T) {
	if Fold("Alice") != Fold("aLICE") || !Same("PRIV", "priv") || Same("priv", "priv2") {
		t.Fatal("case-insensitive identity broken")
	}
}

// A Repo is valid by construction: its forms, its identity across
// spellings, and a text form that round-trips and refuses what Validate
// refuses (a message or a stored key decodes only to a valid name).
func TestRepo(t *testing.T) {
	r, err := New("Alice", "Web")
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "Alice/Web" || r.Key() != "alice/web" || r.Owner() != "Alice" || r.Name() != "Web" || r.IsZero() {
		t.Fatalf("forms of %#v: %q %q", r, r.String(), r.Key())
	}
	if o := MustParse("alice/WEB.git"); !r.Same(o) || r == o || o.String() != "alice/WEB" {
		t.Fatalf("%v and %v: same %v, equal %v", r, o, r.Same(o), r == o)
	}
	if _, err := New("alice", "web.git"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New accepted a .git name: %v", err)
	}
	b, err := json.Marshal(struct{ Repo Repo }{r})
	if err != nil || string(b) != `{"Repo":"Alice/Web"}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back struct{ Repo Repo }
	if err := json.Unmarshal(b, &back); err != nil || back.Repo != r {
		t.Fatalf("unmarshal: %#v, %v", back, err)
	}
	for _, bad := range []string{`""`, `"alice"`, `"api/x"`, `"alice/x.git"`, `"alice/x/y"`, `"alice/.."`} {
		if err := json.Unmarshal([]byte(`{"Repo":`+bad+`}`), &back); err == nil {
			t.Errorf("unmarshal %s: accepted as %v", bad, back.Repo)
		}
	}
	if _, err := json.Marshal(struct{ Repo Repo }{}); err == nil {
		t.Error("the zero Repo marshalled")
	}
}

// TestCompare: Compare orders as the "owner/name" strings do, including
// owners one of which is a prefix of the other ('-' and '.' sort before
// '/', letters and digits after it).
func TestCompare(t *testing.T) {
	spell := []string{"a/b", "a/a", "a-b/a", "a.b/z", "ab/a", "a0/a", "A/b", "a/b-c", "a/b.c", "abc/d", "ab/c", "b/a", "a_/a", "a/-"}
	for _, x := range spell {
		for _, y := range spell {
			a, b := MustParse(x), MustParse(y)
			if got, want := Compare(a, b), strings.Compare(a.String(), b.String()); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
}
