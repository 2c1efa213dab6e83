package repo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

func putLFS(t *testing.T, st objstore.Store, r names.Repo, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	oid := hex.EncodeToString(sum[:])
	if err := st.Put(ctx, LFSKey(r, oid), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return oid
}

// TestForkCopiesLFSObjectsAndDeleteRemovesThem: a fork gets its own copy
// of every LFS object (deleting the source leaves the fork's readable),
// GC leaves LFS objects alone, and deleting a repository removes its own.
func TestForkCopiesLFSObjectsAndDeleteRemovesThem(t *testing.T) {
	forEachStore(t, func(t *testing.T, st objstore.Store) {
		d := newDeps(t, st)
		src := create(t, d, names.MustParse("o/src"))
		a := putLFS(t, st, names.MustParse("o/src"), []byte("first large file"))
		b := putLFS(t, st, names.MustParse("o/src"), []byte("second large file"))
		if err := Fork(ctx, d, snapshot(t, src), names.MustParse("p/fork")); err != nil {
			t.Fatal(err)
		}
		if _, err := gc(src, time.Now().Add(48*time.Hour), time.Hour); err != nil {
			t.Fatal(err)
		}
		src.Close(ctx)
		if err := Delete(ctx, d, names.MustParse("o/src")); err != nil {
			t.Fatal(err)
		}
		if keys := storeKeys(t, st, "objects/o/src/"); len(keys) != 0 {
			t.Fatalf("delete left %v", keys)
		}
		for oid, want := range map[string]string{a: "first large file", b: "second large file"} {
			rc, _, err := st.Get(ctx, LFSKey(names.MustParse("p/fork"), oid))
			if err != nil {
				t.Fatalf("fork's copy of %s: %v", oid, err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if string(got) != want {
				t.Fatalf("fork's %s = %q", oid, got)
			}
		}
	})
}

func TestValidLFSOID(t *testing.T) {
	good := strings.Repeat("0a", 32)
	for s, want := range map[string]bool{
		good: true, strings.ToUpper(good): false, good[:63]: false, good + "0": false,
		strings.Repeat("g", 64): false, "": false, "../" + good[3:]: false,
	} {
		if ValidLFSOID(s) != want {
			t.Errorf("ValidLFSOID(%q) = %v", s, !want)
		}
	}
}

// TestLFSLocks: one lock per path (a second is a *LockedError naming the
// first), survives a reopen, only its holder unlocks it unless forced,
// and paths that cannot be carried on one line are refused.
func TestLFSLocks(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	l, err := r.CreateLock(ctx, "assets/big.psd", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var locked *LockedError
	if _, err := r.CreateLock(ctx, "assets/big.psd", "bob"); !errors.As(err, &locked) || locked.Lock.ID != l.ID || locked.Lock.Holder != "alice" {
		t.Fatalf("second lock: %v, want LockedError naming %s", err, l.ID)
	}
	m, err := r.CreateLock(ctx, "model.bin", "deploy-key SHA256:abc")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a\nb", "tab\tbed", strings.Repeat("x", MaxLockPath+1), "\xff"} {
		if _, err := r.CreateLock(ctx, bad, "alice"); !errors.Is(err, ErrBadLockPath) {
			t.Errorf("lock %q: %v, want ErrBadLockPath", bad, err)
		}
	}
	r.Close(ctx)
	r, err = Open(ctx, d, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	locks, err := r.Locks()
	if err != nil || len(locks) != 2 || locks[0].ID != l.ID || locks[1].ID != m.ID {
		t.Fatalf("locks after reopen: %+v, %v", locks, err)
	}
	if _, err := r.DeleteLock(ctx, l.ID, "bob"); !errors.Is(err, ErrNotLockHolder) {
		t.Fatalf("bob unlocks alice's lock: %v", err)
	}
	if _, err := r.DeleteLock(ctx, m.ID, "deploy-key SHA256:ABC"); !errors.Is(err, ErrNotLockHolder) {
		t.Fatalf("another deploy key unlocks: %v", err)
	}
	if got, err := r.DeleteLock(ctx, l.ID, "ALICE"); err != nil || got.Path != "assets/big.psd" {
		t.Fatalf("alice unlocks: %+v, %v", got, err)
	}
	if _, err := r.DeleteLock(ctx, l.ID, "alice"); !errors.Is(err, ErrNoLock) {
		t.Fatalf("second unlock: %v", err)
	}
	if _, err := r.DeleteLock(ctx, m.ID, ""); err != nil {
		t.Fatalf("forced unlock: %v", err)
	}
	if _, err := r.CreateLock(ctx, "assets/big.psd", "bob"); err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
}

// TestLFSLockRace: many callers lock one path at once; exactly one gets
// it, every other is told who has it.
func TestLFSLockRace(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = r.CreateLock(ctx, "one/path", fmt.Sprint("user", i)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var locked *LockedError
		switch {
		case err == nil:
			won++
		case errors.As(err, &locked):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if locks, _ := r.Locks(); won != 1 || len(locks) != 1 {
		t.Fatalf("%d winners, %d locks; want 1 and 1", won, len(locks))
	}
}
