package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// TestLFSLocksThroughActor: locks are written by the repository's actor
// and read back from it; a conflict names the lock that won, an unlock by
// someone else is refused, and a forced one is not.
func TestLFSLocksThroughActor(t *testing.T) {
	ctx := context.Background()
	n, d := newTestNode(t, memstore.New(), time.Minute, 8)
	if err := repo.Create(ctx, d, names.MustParse("alice/game")); err != nil {
		t.Fatal(err)
	}
	l, err := n.CreateLock(ctx, names.MustParse("alice/game"), "level1.bin", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var locked *repo.LockedError
	if _, err := n.CreateLock(ctx, names.MustParse("alice/game"), "level1.bin", "bob"); !errors.As(err, &locked) || locked.Lock.ID != l.ID {
		t.Fatalf("bob's lock of the same path: %v", err)
	}
	if _, err := n.DeleteLock(ctx, names.MustParse("alice/game"), l.ID, "bob"); !errors.Is(err, repo.ErrNotLockHolder) {
		t.Fatalf("bob unlocks: %v", err)
	}
	if locks, err := n.Locks(ctx, names.MustParse("alice/game")); err != nil || len(locks) != 1 || locks[0].Holder != "alice" {
		t.Fatalf("locks: %+v, %v", locks, err)
	}
	if got, err := n.DeleteLock(ctx, names.MustParse("alice/game"), l.ID, ""); err != nil || got.ID != l.ID {
		t.Fatalf("forced unlock: %+v, %v", got, err)
	}
	if locks, err := n.Locks(ctx, names.MustParse("alice/game")); err != nil || len(locks) != 0 {
		t.Fatalf("locks after unlock: %+v, %v", locks, err)
	}
	if _, err := n.Locks(ctx, names.MustParse("alice/missing")); !errors.Is(err, repo.ErrNotFound) {
		t.Fatalf("locks of a missing repository: %v", err)
	}
}
