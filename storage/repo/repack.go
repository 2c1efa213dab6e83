package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/walk"
)

// retiredInfo is the value of a "retired/{name}" entry: a pack replaced by
// a repack, kept until GC finds it past its grace period.
type retiredInfo struct {
	Retired time.Time `json:"retired"`
}

// ErrConcurrentUpdate: refs changed while Repack was writing; nothing was
// committed and the caller may retry.
var ErrConcurrentUpdate = errors.New("refs changed during repack")

// repackMaxCommits bounds the commit cache of the reachability walk.
const repackMaxCommits = 1 << 16

// Repack writes one pack holding every object reachable from the refs,
// uploads it with its reachability bitmap, and in one transaction lists it and retires the packs it
// replaces (recorded as "retired/{name}"; GC deletes them after the grace
// period so running clones finish). Unreachable objects are dropped; the
// transaction checks the ref generation so a push that landed meanwhile
// (and might use an object about to be dropped) fails the repack with
// ErrConcurrentUpdate instead. With no packs or no refs it does nothing
// and returns a zero PackInfo.
func (r *Repo) Repack(ctx context.Context, progress func(stage string, done, total uint64)) (PackInfo, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return PackInfo{}, err
	}
	defer snap.Close()
	if len(snap.Packs) == 0 || len(snap.Refs) == 0 {
		return PackInfo{}, nil
	}
	ids, err := reachable(ctx, snap)
	if err != nil {
		return PackInfo{}, fmt.Errorf("repack %s/%s: %w", r.owner, r.name, err)
	}
	dir := os.TempDir()
	if r.d.Cache != nil {
		dir = r.d.Cache.TempDir()
	}
	ix, err := writeAndIndex(ctx, snap.Objects(), ids, dir, progress)
	if err != nil {
		return PackInfo{}, fmt.Errorf("repack %s/%s: %w", r.owner, r.name, err)
	}
	info, err := r.StagePack(ctx, ix)
	// StagePack adopted the files into the cache; these removals only
	// matter when it did not.
	_ = os.Remove(ix.PackPath)
	_ = os.Remove(ix.IdxPath)
	if err != nil {
		return PackInfo{}, fmt.Errorf("repack %s/%s: %w", r.owner, r.name, err)
	}
	// Before listing, so the pack is never served without its bitmap on a
	// node that opens it later. A failure costs fetches time, not the repack.
	if err := BuildBitmap(ctx, r.d, r.owner, r.name, info.Name, refTips(snap.Refs)); err != nil {
		if ctx.Err() != nil {
			return PackInfo{}, fmt.Errorf("repack %s/%s: %w", r.owner, r.name, ctx.Err())
		}
		r.log.Warn("repack: no bitmap for the new pack", zap.String("pack", info.Name), zap.Error(err))
	}
	txn := append(refdb.Txn{refGenCheck(snap.st.refGen)}, listPack(info)...)
	retired, _ := json.Marshal(retiredInfo{Retired: r.d.now().UTC()})
	for _, p := range snap.Packs {
		if p.Name == info.Name { // the same bytes came out again
			continue
		}
		// RemoveIf: a concurrent repack that already retired it loses cleanly.
		txn = append(txn, refdb.RemoveIf(prefixPack+p.Name, snap.st.packRaw[p.Name]),
			refdb.Set(prefixRetired+p.Name, retired))
	}
	if _, err := r.db.Commit(ctx, txn); err != nil {
		var ce *refdb.ConflictError
		if errors.As(err, &ce) && ce.Key == keyRefGen {
			err = ErrConcurrentUpdate
		}
		// The uploaded pack is unlisted garbage now; GC removes it.
		return PackInfo{}, fmt.Errorf("repack %s/%s: commit pack list: %w", r.owner, r.name, err)
	}
	r.log.Info("repacked", zap.String("pack", info.Name), zap.Int("objects", info.Objects),
		zap.Int("replaced", len(snap.Packs)))
	return info, nil
}

// reachable lists every object reachable from the snapshot's refs.
func reachable(ctx context.Context, snap *Snapshot) ([]object.ID, error) {
	g := walk.NewGraph(snap.Objects(), repackMaxCommits)
	res, err := walk.Objects(ctx, g, walk.Request{Wants: refTips(snap.Refs)})
	if err != nil {
		return nil, fmt.Errorf("list reachable objects: %w", err)
	}
	return res.Objects, nil
}

// refGenCheck asserts that no ref update committed since gen was read.
func refGenCheck(gen []byte) refdb.Op {
	return refdb.Check(keyRefGen, gen, gen == nil)
}

// writeAndIndex streams WritePack straight into IndexPack, so the new pack
// is written to disk once and never held in memory.
func writeAndIndex(ctx context.Context, set *pack.Set, ids []object.ID, dir string, progress func(string, uint64, uint64)) (*pack.Indexed, error) {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		_, err := set.WritePack(ctx, pw, ids, pack.WriteOptions{OfsDelta: true, Progress: progress})
		pw.CloseWithError(err)
		werr <- err
	}()
	ix, err := pack.IndexPack(ctx, pr, dir, pack.IndexOptions{Progress: progress})
	pr.CloseWithError(errors.New("indexer stopped")) // unblocks the writer if the indexer quit early
	if wErr := <-werr; wErr != nil {
		if ix != nil {
			_ = os.Remove(ix.PackPath)
			_ = os.Remove(ix.IdxPath)
		}
		return nil, fmt.Errorf("write pack: %w", wErr)
	}
	if err != nil {
		return nil, fmt.Errorf("index pack: %w", err)
	}
	return ix, nil
}

// GCStats reports what GC did.
type GCStats struct {
	Listed       int   // packs listed in the database
	DeletedKeys  int   // objects deleted (pack and idx count separately)
	DeletedBytes int64 // their size
	KeptYoung    int   // unlisted objects kept because they are younger than minAge
	Retired      int   // retired packs whose grace period ended (entries removed)
}

// GC opens the repository as writer (fencing any live writer: use
// (*Repo).GC from the owner instead) and collects its garbage. If the
// database does not exist, every pack object older than minAge is garbage
// (a crashed fork or delete).
func GC(ctx context.Context, d Deps, owner, name string, now time.Time, minAge time.Duration) (GCStats, error) {
	r, err := Open(ctx, d, owner, name)
	if errors.Is(err, ErrNotFound) {
		return collect(ctx, d, owner, name, now, minAge, nil)
	}
	if err != nil {
		return GCStats{}, err
	}
	defer r.Close(ctx)
	return r.GC(ctx, now, minAge)
}

// GC deletes pack objects that no "pack/" entry references and that are
// older than minAge (rejected or crashed pushes; minAge must exceed the
// longest push so a staged pack is never taken), and retired packs whose
// retirement is older than minAge, with their entries.
func (r *Repo) GC(ctx context.Context, now time.Time, minAge time.Duration) (GCStats, error) {
	v := r.db.View()
	keep := map[string]bool{}
	for k := range v.Scan(prefixPack) {
		keep[strings.TrimPrefix(k, prefixPack)] = true
	}
	listed := len(keep)
	var txn refdb.Txn
	for k, val := range v.Scan(prefixRetired) {
		name := strings.TrimPrefix(k, prefixRetired)
		if keep[name] {
			continue // listed again; listing normally drops the entry
		}
		var ri retiredInfo
		if err := json.Unmarshal(val, &ri); err != nil {
			r.log.Warn("gc: unreadable retired entry; dropping it", zap.String("key", k), zap.Error(err))
		} else if now.Sub(ri.Retired) < minAge {
			keep[name] = true
			continue
		}
		// The entry goes before the objects: if a push re-listed the very
		// same pack meanwhile, the Check fails and the objects stay.
		txn = append(txn, refdb.RemoveIf(k, val), refdb.Check(prefixPack+name, nil, true))
	}
	stats := GCStats{Listed: listed}
	if len(txn) > 0 {
		if _, err := r.db.Commit(ctx, txn); err != nil {
			return stats, fmt.Errorf("gc %s/%s: drop retired entries: %w", r.owner, r.name, err)
		}
		stats.Retired = len(txn) / 2
	}
	s, err := collect(ctx, r.d, r.owner, r.name, now, minAge, keep)
	s.Listed, s.Retired = stats.Listed, stats.Retired
	return s, err
}

// collect deletes objects under the repo's pack prefix whose pack is not
// in keep and which are older than minAge.
func collect(ctx context.Context, d Deps, owner, name string, now time.Time, minAge time.Duration, keep map[string]bool) (GCStats, error) {
	var stats GCStats
	var doomed []objstore.ObjectInfo
	prefix := packPrefix(owner, name)
	for info, err := range d.Store.List(ctx, prefix, "") {
		if err != nil {
			return stats, fmt.Errorf("gc %s/%s: list: %w", owner, name, err)
		}
		if pn, ok := packNameOfKey(info.Key); ok && keep[pn] {
			continue
		}
		if now.Sub(info.ModTime) < minAge {
			stats.KeptYoung++
			continue
		}
		doomed = append(doomed, info)
	}
	for _, info := range doomed {
		if err := deleteKey(ctx, d, info.Key); err != nil {
			return stats, fmt.Errorf("gc %s/%s: %w", owner, name, err)
		}
		stats.DeletedKeys++
		stats.DeletedBytes += info.Size
	}
	return stats, nil
}
