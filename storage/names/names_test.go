package names

import (
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
		_, name, err := Clean(tc.owner, tc.raw)
		if (err == nil) != tc.ok || name != tc.name {
			t.Errorf("Clean(%q, %q) = %q, %v; want %q ok=%v", tc.owner, tc.raw, name, err, tc.name, tc.ok)
		}
	}
}

func TestSplit(t *testing.T) {
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
		o, n, err := Split(tc.in)
		if (err == nil) != tc.ok || o != tc.owner || n != tc.name {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q ok=%v", tc.in, o, n, err, tc.owner, tc.name, tc.ok)
		}
	}
}

func TestFold(t *testing.T) {
	if Fold("Alice") != Fold("aLICE") || !Same("PRIV", "priv") || Same("priv", "priv2") {
		t.Fatal("case-insensitive identity broken")
	}
}
