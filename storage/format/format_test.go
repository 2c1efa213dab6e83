package format

import (
	"errors"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	f := Format{Name: "thing", Oldest: 2, Newest: 4, Write: 3}
	for _, tc := range []struct {
		v    uint32
		want Verdict
	}{
		{0, TooOld},
		{1, TooOld},
		{2, Read},
		{3, Read},
		{4, Read},
		{5, TooNew},
		{255, TooNew},
		{1 << 31, TooNew},
	} {
		if got := f.Decide(tc.v); got != tc.want {
			t.Errorf("Decide(%d) = %v, want %v", tc.v, got, tc.want)
		}
	}
	one := Format{Name: "one", Oldest: 1, Newest: 1, Write: 1}
	for v, want := range map[uint32]Verdict{0: TooOld, 1: Read, 2: TooNew} {
		if got := one.Decide(v); got != want {
			t.Errorf("one.Decide(%d) = %v, want %v", v, got, want)
		}
	}
}

func TestCheckNamesTheVersion(t *testing.T) {
	err := RefDB.Check(RefDB.Newest + 1)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Check(newest+1) = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"ref-database record", "version 2", "reads versions 1 to 1", "newer rgit release"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if err := OwnershipEntry.Check(0); err == nil || !strings.Contains(err.Error(), "older than") {
		t.Errorf("Check(0) = %v, want a too-old refusal", err)
	}
	if err := Bitmap.Check(3); err != nil {
		t.Errorf("Bitmap.Check(3) = %v", err)
	}
}

// TestTable: this build writes a version it reads; it reads what the
// previous release wrote, and writes nothing the previous release
// refuses (a rolling update, and a downgrade, work); names are distinct
// (they are what an operator reads).
func TestTable(t *testing.T) {
	names := map[string]bool{}
	for _, f := range All {
		if f.Decide(f.Write) != Read {
			t.Errorf("%s: writes version %d, which it does not read", f.Name, f.Write)
		}
		if f.Decide(f.Prev.Write) != Read {
			t.Errorf("%s: the previous release writes version %d, which this build does not read", f.Name, f.Prev.Write)
		}
		if f.Write > f.Prev.Newest {
			t.Errorf("%s: writes version %d, newer than the previous release reads (%d): read it in one release, write it in the next", f.Name, f.Write, f.Prev.Newest)
		}
		if f.Oldest == 0 || f.Oldest > f.Newest {
			t.Errorf("%s: reads %d to %d", f.Name, f.Oldest, f.Newest)
		}
		if names[f.Name] {
			t.Errorf("two formats named %q", f.Name)
		}
		names[f.Name] = true
	}
}
