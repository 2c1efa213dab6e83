package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/refdb"
)

// Per-command results of UpdateRefs (wrapped; test with errors.Is).
var (
	// ErrStale: the ref did not hold Old (someone else updated it first).
	ErrStale = errors.New("fetch first")
	// ErrAtomicFailed: another command of an atomic push failed.
	ErrAtomicFailed = errors.New("atomic push failed")
	// ErrInvalidUpdate: the command itself is malformed.
	ErrInvalidUpdate = errors.New("invalid ref update")
)

// RefUpdate is one push command. Old zero: the ref must not exist. New
// zero: delete the ref.
type RefUpdate struct {
	Name     string
	Old, New object.ID
	// Deleted is, for a creation, the value the ref was deleted at while a
	// no-force-push rule covered it (Snapshot.DeletedTip): the creation
	// is then checked as an update from it. Zero: a plain creation.
	Deleted object.ID
	// FastForward: Old (or Deleted) is an ancestor of New, as the caller
	// found by walking the history. Protected refs refuse updates without
	// it (forced, or not walked because the ref was not protected when the
	// push was checked). Ignored for plain creations and deletions.
	FastForward bool
}

// Kind is what the command does, as protection rules see it.
func (c RefUpdate) Kind() auth.UpdateKind {
	switch {
	case c.New.IsZero():
		return auth.Delete
	case c.Old.IsZero() && c.Deleted.IsZero():
		return auth.Create
	case c.FastForward:
		return auth.FastForward
	case c.Old.IsZero():
		return auth.Recreate
	}
	return auth.Force
}

// StagePack uploads an indexed pack (pack, then idx) and adopts its files
// into the local cache. Nothing becomes visible: the pack is listed only by
// the UpdateRefs transaction that needs it; until then GC may delete it
// once it is old enough.
func (r *Repo) StagePack(ctx context.Context, ix *pack.Indexed) (PackInfo, error) {
	return StagePack(ctx, r.d, r.name, ix)
}

// StagePack is (*Repo).StagePack for callers that do not hold the database:
// uploading touches no ref, so sessions run it on their own goroutine and
// only the UpdateRefs transaction goes through the repository's writer.
func StagePack(ctx context.Context, d Deps, r names.Repo, ix *pack.Indexed) (PackInfo, error) {
	return stagePack(ctx, d, r, ix, func(ctx context.Context, key string) (int64, error) {
		return putFile(ctx, d, key, ix.PackPath)
	})
}

// stagePack stores the pack with putPack, then its idx, and adopts both
// into the local cache.
func stagePack(ctx context.Context, d Deps, r names.Repo, ix *pack.Indexed, putPack func(ctx context.Context, key string) (int64, error)) (PackInfo, error) {
	packName := "pack-" + ix.Checksum.String()
	pk, ik := PackKeys(r, packName)
	size, err := putPack(ctx, pk)
	if err != nil {
		return PackInfo{}, fmt.Errorf("stage %s in %s: %w", packName, r, err)
	}
	idxSize, err := putFile(ctx, d, ik, ix.IdxPath)
	if err != nil {
		return PackInfo{}, fmt.Errorf("stage %s in %s: %w", packName, r, err)
	}
	info := PackInfo{Name: packName, Size: size, IdxSize: idxSize, Objects: len(ix.Objects), Created: d.now().UTC()}
	if d.Cache != nil {
		// Only an optimisation: on failure the first reader downloads it.
		if err := d.Cache.Adopt(ix.PackPath, ix.IdxPath, packName); err != nil {
			d.log().Warn("adopt staged pack into cache", zap.String("pack", packName), zap.Error(err))
		}
	}
	return info, nil
}

// putFile streams a local file to key.
func putFile(ctx context.Context, d Deps, key, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := d.Store.Put(ctx, key, f, st.Size()); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	return st.Size(), nil
}

// UpdateRefs applies push commands with compare-and-set in one database
// transaction together with the staged pack's "pack/" entry (staged may be
// nil, e.g. for deletions only).
//
// atomic: all commands land or none; on a conflict the conflicting command
// fails with ErrStale and every other with ErrAtomicFailed. Not atomic:
// conflicting commands fail with ErrStale and the transaction is retried
// without them so the others land; the pack entry is committed with the
// first successful transaction, or not at all.
//
// Commands a protected ref pattern refuses (by the rules the database
// holds now) fail with a *ProtectedError before anything is written.
//
// The transaction also queues the webhook events of the applied commands
// (hooks.go), the pusher being the identity in ctx.
//
// The []error has one entry per command (nil = applied). The error return
// is for failures of the whole call (no command applied); it wraps
// refdb.ErrFenced when this writer has been fenced.
func (r *Repo) UpdateRefs(ctx context.Context, staged *PackInfo, cmds []RefUpdate, atomic bool) ([]error, error) {
	results := make([]error, len(cmds))
	active := checkCommands(cmds, results)
	ps, err := r.Protections()
	if err != nil {
		return nil, fmt.Errorf("update refs of %s: %w", r.name, err)
	}
	r.protectionResults(ps, cmds, results)
	deleted := r.deletedTipOps(ps, cmds)
	active = slices.DeleteFunc(active, func(i int) bool { return results[i] != nil })
	if len(active) < len(cmds) && atomic {
		failRest(results, active)
		return results, nil
	}
	extra := []refdb.Op{refdb.Set(keyRefGen, newRefGen())}
	if staged != nil {
		extra = append(extra, listPack(*staged)...)
	}
	for len(active) > 0 {
		txn, queued, err := r.withEvents(buildTxn(cmds, active, deleted, extra), r.refEvents(ctx, cmds, active)...)
		if err != nil {
			return nil, err
		}
		_, err = r.commitMarked(ctx, txn, queued)
		if err == nil {
			return results, nil
		}
		var ce *refdb.ConflictError
		if !errors.As(err, &ce) {
			return nil, fmt.Errorf("update refs of %s: %w", r.name, err)
		}
		i := conflictIndex(cmds, active, ce.Key)
		if i < 0 {
			return nil, fmt.Errorf("update refs of %s: unexpected %w", r.name, err)
		}
		results[i] = fmt.Errorf("%s: %w", cmds[i].Name, ErrStale)
		active = without(active, i)
		if atomic {
			failRest(results, active)
			return results, nil
		}
	}
	return results, nil
}

// listPack returns the ops that list a pack; a pack that comes back with
// identical bytes after a repack retired it is no longer retired.
func listPack(p PackInfo) []refdb.Op {
	return []refdb.Op{refdb.Set(prefixPack+p.Name, p.encode()), refdb.Remove(prefixRetired + p.Name)}
}

// newRefGen returns a fresh ref generation value; uniqueness is all that
// matters (Repack compares for equality).
func newRefGen() []byte {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return []byte(hex.EncodeToString(b[:]))
}

// newWriterID names one open of the repository (its marker, hooks.go).
func newWriterID() string { return string(newRefGen()) }

// checkCommands records per-command validation errors and returns the
// indexes of the valid ones.
func checkCommands(cmds []RefUpdate, results []error) []int {
	seen := make(map[string]bool, len(cmds))
	active := make([]int, 0, len(cmds))
	for i, c := range cmds {
		switch err := validateRefName(c.Name); {
		case err != nil:
			results[i] = fmt.Errorf("%w: %v", ErrInvalidUpdate, err)
		case c.Old.IsZero() && c.New.IsZero():
			results[i] = fmt.Errorf("%w: %s: both old and new are zero", ErrInvalidUpdate, c.Name)
		case seen[c.Name]:
			results[i] = fmt.Errorf("%w: %s: updated twice", ErrInvalidUpdate, c.Name)
		default:
			seen[c.Name] = true
			active = append(active, i)
		}
	}
	return active
}

// failRest marks every still-pending command as failed by atomicity.
func failRest(results []error, active []int) {
	for _, j := range active {
		if results[j] == nil {
			results[j] = ErrAtomicFailed
		}
	}
}

// buildTxn turns the active commands into one transaction: each
// command's compare-and-set, its op on its deleted tip (deleted[i], if
// any, see deletedTipOps) and extra.
func buildTxn(cmds []RefUpdate, active []int, deleted []refdb.Op, extra []refdb.Op) refdb.Txn {
	txn := make(refdb.Txn, 0, len(active)+len(extra))
	for _, i := range active {
		if deleted[i].Key != "" {
			txn = append(txn, deleted[i])
		}
		c := cmds[i]
		key := prefixRef + c.Name
		switch {
		case c.Old.IsZero():
			txn = append(txn, refdb.Create(key, []byte(c.New.String())))
		case c.New.IsZero():
			txn = append(txn, refdb.RemoveIf(key, []byte(c.Old.String())))
		default:
			txn = append(txn, refdb.Swap(key, []byte(c.Old.String()), []byte(c.New.String())))
		}
	}
	return append(txn, extra...)
}

func conflictIndex(cmds []RefUpdate, active []int, key string) int {
	for _, i := range active {
		if prefixRef+cmds[i].Name == key {
			return i
		}
	}
	return -1
}

func without(active []int, i int) []int {
	out := active[:0:0]
	for _, j := range active {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}
