package linearize

import (
	"strings"
	"testing"
	"time"
)

// at is a time t0+ms.
func at(ms int) time.Time {
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

func read(c, from, to int, v string) Op {
	return Op{Client: c, Key: "r main", Kind: Read, Value: v, Call: at(from), Return: at(to)}
}

func cas(c, from, to int, old, new string, out Outcome) Op {
	return Op{Client: c, Key: "r main", Kind: CAS, Old: old, New: new, Outcome: out, Call: at(from), Return: at(to)}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"empty", nil, true},
		{"write then read", []Op{cas(0, 0, 10, "", "a", OK), read(1, 20, 30, "a")}, true},
		{"stale read after an acknowledged write", []Op{cas(0, 0, 10, "", "a", OK), read(1, 20, 30, "")}, false},
		{"concurrent read may see either", []Op{cas(0, 0, 10, "", "a", OK), read(1, 5, 6, "")}, true},
		{"lost write", []Op{cas(0, 0, 10, "", "a", OK), cas(1, 20, 30, "a", "b", OK), read(2, 40, 50, "a")}, false},
		{"two CAS from one value both applied", []Op{cas(0, 0, 10, "", "a", OK), cas(1, 0, 10, "", "b", OK)}, false},
		{"rejected CAS saw another value", []Op{cas(0, 0, 10, "", "a", OK), cas(1, 20, 30, "", "b", Rejected), read(2, 40, 50, "a")}, true},
		{"rejected CAS although the value matched", []Op{cas(0, 0, 10, "", "a", OK), cas(1, 20, 30, "a", "b", Rejected), read(2, 40, 50, "a")}, false},
		{"unknown CAS seen later", []Op{cas(0, 0, 10, "", "a", Unknown), read(1, 20, 30, "a")}, true},
		{"unknown CAS never seen", []Op{cas(0, 0, 10, "", "a", Unknown), read(1, 20, 30, "")}, true},
		{"unknown CAS seen late after absent", []Op{cas(0, 0, 10, "", "a", Unknown), read(1, 20, 30, ""), read(1, 40, 50, "a")}, true},
		{"unknown CAS cannot undo", []Op{cas(0, 0, 10, "", "a", Unknown), read(1, 20, 30, "a"), read(1, 40, 50, "")}, false},
		{"value from nowhere", []Op{read(0, 0, 10, "z")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops, t.TempDir(), 0)
			if r.OK != tc.ok {
				t.Fatalf("OK = %v, want %v\n%s", r.OK, tc.ok, r.Excerpt)
			}
			if !tc.ok && (r.Key != "r main" || r.Visualization == "") {
				t.Errorf("failing key %q, visualization %q", r.Key, r.Visualization)
			}
		})
	}
}

// TestMinimalPrefix: the excerpt ends at the first operation no
// linearization can explain, not at the end of the history.
func TestMinimalPrefix(t *testing.T) {
	ops := []Op{
		cas(0, 0, 10, "", "a", OK),
		read(1, 20, 30, "a"),
		cas(0, 40, 50, "a", "b", OK),
		read(1, 60, 70, "a"), // stale: the violation
		cas(0, 80, 90, "b", "c", OK),
		read(1, 100, 110, "c"),
		read(2, 120, 130, "c"),
	}
	r := Check(ops, "", 0)
	if r.OK {
		t.Fatal("a stale read passed")
	}
	t.Log(r.Excerpt)
	if !strings.Contains(r.Excerpt, "4 operations") || strings.Contains(r.Excerpt, "→ c") {
		t.Errorf("excerpt is not the 4-operation prefix ending at the stale read:\n%s", r.Excerpt)
	}
	for _, l := range strings.Split(r.Excerpt, "\n") {
		if strings.Contains(l, "←") != strings.Contains(l, "[60ms, 70ms] read → a") {
			t.Errorf("excerpt line %q: the stale read at 60ms, and only it, is to be marked as failing", l)
		}
	}
}

// TestSeparateKeys: registers are independent; a violation names its key.
func TestSeparateKeys(t *testing.T) {
	a := cas(0, 0, 10, "", "x", OK)
	a.Key = "r a"
	b := read(1, 20, 30, "y")
	b.Key = "r b"
	r := Check([]Op{a, b}, "", 0)
	if r.OK || r.Key != "r b" {
		t.Fatalf("OK %v key %q, want the violation on r b", r.OK, r.Key)
	}
}
