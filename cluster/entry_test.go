package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/format"
)

func TestEntryRoundTrip(t *testing.T) {
	in := Entry{Node: "rgit-12", Expires: at(10*time.Second + 7), Written: at(-time.Hour), Epoch: 1 << 40}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Entry
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
}

func TestEntryStrict(t *testing.T) {
	good, _ := Entry{Node: "rgit-1", Expires: t0, Written: t0, Epoch: 3}.MarshalBinary()
	bad := map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 'x'),
		"epoch 0":   {1, 0, 0, 0, 1, 'a'},
		"bad node":  {1, 1, 0, 0, 1, '/'},
		"no node":   {1, 1, 0, 0, 0},
	}
	for name, b := range bad {
		var e Entry
		if err := e.UnmarshalBinary(b); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%s: err = %v, want ErrCorruptEntry", name, err)
		}
	}
	// A version this build does not read is refused by name, not taken
	// for damage.
	for _, v := range []byte{0, 3} {
		var e Entry
		err := e.UnmarshalBinary(append([]byte{v}, good[1:]...))
		if !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), fmt.Sprintf("ownership entry version %d ", v)) {
			t.Errorf("version %d: err = %v, want a refusal naming it", v, err)
		}
	}
	for name, e := range map[string]Entry{
		"epoch 0":   {Node: "rgit-1", Expires: t0, Written: t0},
		"no node":   {Expires: t0, Written: t0, Epoch: 1},
		"zero time": {Node: "rgit-1", Written: t0, Epoch: 1},
	} {
		if _, err := e.MarshalBinary(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestKey(t *testing.T) {
	k := Key(rn("alice/proj"))
	if k != "own/alice/proj" {
		t.Fatalf("Key = %q", k)
	}
	r, err := RepoOfKey(k)
	if err != nil || r != rn("alice/proj") {
		t.Fatalf("RepoOfKey = %q, %v", r, err)
	}
	for _, bad := range []string{"refs/a/b", "own/a", "own/", "own/alice/", "own//proj", "own/a/b/c", "own/a b/c", "own/alice/x.git"} {
		if _, err := RepoOfKey(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("RepoOfKey(%q) err = %v", bad, err)
		}
	}
}
