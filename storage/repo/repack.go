package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
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

// ErrConcurrentUpdate: the refs or the pack list changed between the
// snapshot a repack was built from and its commit; nothing was committed
// and the caller may build again from a fresh snapshot.
var ErrConcurrentUpdate = errors.New("repository changed during repack")

// repackMaxCommits bounds the commit cache of the reachability walk.
const repackMaxCommits = 1 << 16

// RepackBuild is a pack written from one snapshot: uploaded with its
// bitmap but not listed. CommitRepack lists it if the repository still has
// the refs and packs it was built from; otherwise it is garbage for GC.
type RepackBuild struct {
	Repo names.Repo
	Pack PackInfo
	// What the snapshot held: the ref generation and the exact stored
	// entry of every pack the new one replaces. A roll-up (BuildRollUp)
	// drops no object, so a push meanwhile cannot conflict with it and
	// its refGen is not checked.
	rollUp   bool
	refGen   []byte
	replaced map[string][]byte
}

// BuildRepack writes one pack holding every object reachable from snap's
// refs, uploads it with its reachability bitmap, and returns it unlisted.
// It is pure storage work, no database write: run it outside the repo
// actor, from a session's snapshot, so the repository keeps serving. With
// no packs or no refs there is nothing to do and it returns nil.
// Deltas are the stored ones, reused (see pack.Set.WriteRepack).
func BuildRepack(ctx context.Context, d Deps, snap *Snapshot, progress pack.ProgressFunc) (*RepackBuild, error) {
	if len(snap.Packs) == 0 || len(snap.Refs) == 0 {
		return nil, nil
	}
	fail := func(err error) (*RepackBuild, error) {
		return nil, fmt.Errorf("repack %s: %w", snap.Repo, err)
	}
	res, err := reachable(ctx, snap)
	if err != nil {
		return fail(err)
	}
	info, err := writePack(ctx, d, snap, snap.Objects(), res.Objects, nil, true, progress)
	if err != nil {
		return fail(err)
	}
	b := &RepackBuild{Repo: snap.Repo, Pack: info, refGen: snap.st.refGen,
		replaced: map[string][]byte{}}
	for _, p := range snap.Packs {
		if p.Name != info.Name { // the same bytes may come out again
			b.replaced[p.Name] = snap.st.packRaw[p.Name]
		}
	}
	return b, nil
}

// CommitRepack is the switch to a built pack, run by the repository's
// writer (the repo actor): in one transaction it lists the new pack and
// retires the packs it replaces (recorded as "retired/{name}"; GC deletes
// them after the grace period so running clones finish). The transaction
// checks the ref generation (not for a roll-up, which drops nothing) and
// the replaced entries: if a push or another repack landed since the
// snapshot (a push might use an object the new pack dropped), it commits
// nothing and fails with ErrConcurrentUpdate.
func (r *Repo) CommitRepack(ctx context.Context, b *RepackBuild) (PackInfo, error) {
	if b.Repo != r.name {
		return PackInfo{}, fmt.Errorf("repack of %s committed to %s", b.Repo, r.name)
	}
	txn := refdb.Txn(listPack(b.Pack))
	if !b.rollUp {
		txn = append(txn, refGenCheck(b.refGen))
	}
	retired, _ := json.Marshal(retiredInfo{Retired: r.d.now().UTC()})
	for _, name := range slices.Sorted(maps.Keys(b.replaced)) {
		txn = append(txn, refdb.RemoveIf(prefixPack+name, b.replaced[name]),
			refdb.Set(prefixRetired+name, retired))
	}
	if _, err := r.db.Commit(ctx, txn); err != nil {
		var ce *refdb.ConflictError
		if errors.As(err, &ce) {
			err = fmt.Errorf("%w (%s)", ErrConcurrentUpdate, ce.Key)
		}
		// The uploaded pack is unlisted garbage now; GC removes it. It is
		// not deleted here: a concurrent repack may have listed the very
		// same bytes. It leaves this node's cache, though: held there it
		// would keep a descriptor, its mapped index and the delta bases
		// its bitmap build inflated until the cache's byte budget pushed
		// it out (a node whose full repacks kept conflicting grew by one
		// such pack per push), unless the same bytes are listed.
		if _, listed := r.db.View().Get(prefixPack + b.Pack.Name); !listed && r.d.Cache != nil {
			if rerr := r.d.Cache.Remove(b.Pack.Name); rerr != nil {
				r.log.Warn("drop an unlisted repack from the cache", zap.String("pack", b.Pack.Name), zap.Error(rerr))
			}
		}
		return PackInfo{}, fmt.Errorf("repack %s: commit pack list: %w", r.name, err)
	}
	r.log.Info("repacked", zap.String("pack", b.Pack.Name), zap.Int("objects", b.Pack.Objects),
		zap.Int("replaced", len(b.replaced)))
	// The replaced packs are garbage on this node: without this every
	// roll-up would leave its inputs cached, open and mapped until the
	// cache's budgets push them out. Sessions still reading one keep their
	// handle; a fork sharing a pack by name downloads it again.
	if r.d.Cache != nil {
		for name := range b.replaced {
			if err := r.d.Cache.Remove(name); err != nil {
				r.log.Warn("drop a replaced pack from the cache", zap.String("pack", name), zap.Error(err))
			}
		}
	}
	return b.Pack, nil
}

// pathHashes names the trees and blobs of res (a walk's result: commits
// first) by the first path the commits' trees reach them under, as
// pack.NameHash, so the delta search sorts versions of one file together.
// It reads each tree once and keeps 5 bytes per object.
func pathHashes(ctx context.Context, r object.Reader, res *walk.Result) (func(object.ID) uint32, error) {
	ids := slices.Clone(res.Objects)
	slices.SortFunc(ids, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	hashes := make([]uint32, len(ids))
	seen := make([]bool, len(ids))
	at := func(id object.ID) (int, bool) {
		return slices.BinarySearchFunc(ids, id, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	}
	steps := 0
	var tree func(id object.ID, path string) error
	tree = func(id object.ID, path string) error {
		i, ok := at(id)
		if !ok || seen[i] {
			return nil
		}
		seen[i] = true
		if steps++; steps%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		_, data, err := r.ReadObject(id)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", id, err)
		}
		it := object.NewTreeIter(data)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			p := path + string(e.Name)
			if e.IsTree() {
				if i, ok := at(e.ID); ok && !seen[i] {
					hashes[i] = pack.NameHash(p)
				}
				if err := tree(e.ID, p+"/"); err != nil {
					return err
				}
			} else if i, ok := at(e.ID); ok && !seen[i] {
				seen[i], hashes[i] = true, pack.NameHash(p)
			}
		}
		return it.Err()
	}
	for _, c := range res.Objects[:res.Commits] {
		_, data, err := r.ReadObject(c)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", c, err)
		}
		ci, err := object.ParseCommit(data)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c, err)
		}
		if err := tree(ci.Tree, ""); err != nil {
			return nil, err
		}
	}
	return func(id object.ID) uint32 {
		if i, ok := at(id); ok {
			return hashes[i]
		}
		return 0
	}, nil
}

// writePack writes ids, read from set, into a new pack for snap's
// repository and uploads it unlisted; search, if not nil, searches deltas
// afresh instead of copying stored ones; withBitmap adds its reachability
// bitmap, uploaded before anything lists the pack so it is never served
// without one (a bitmap failure costs fetches time, not the pack).
func writePack(ctx context.Context, d Deps, snap *Snapshot, set *pack.Set, ids []object.ID, search *pack.DeltaSearchOptions, withBitmap bool, progress pack.ProgressFunc) (PackInfo, error) {
	dir := os.TempDir()
	if d.Cache != nil {
		dir = d.Cache.TempDir()
	}
	var err error
	var ix *pack.Indexed
	if search != nil {
		budget := d.freshDeltaBudget()
		sctx, cancel := context.WithTimeout(ctx, budget)
		ix, err = writeAndIndex(sctx, set, ids, search, dir, progress)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			d.log().Warn("delta search took too long; repacking with stored deltas", zap.Stringer("repo", snap.Repo),
				zap.Int("objects", len(ids)), zap.Duration("budget", budget))
			search = nil
		}
	}
	if search == nil {
		ix, err = writeAndIndex(ctx, set, ids, nil, dir, progress)
	}
	if err != nil {
		return PackInfo{}, err
	}
	info, err := StagePack(ctx, d, snap.Repo, ix)
	// StagePack adopted the files into the cache; these removals only
	// matter when it did not.
	_ = os.Remove(ix.PackPath)
	_ = os.Remove(ix.IdxPath)
	if err != nil || !withBitmap {
		return info, err
	}
	if err := BuildBitmap(ctx, d, snap.Repo, info.Name, refTips(snap.Refs)); err != nil {
		if ctx.Err() != nil {
			return PackInfo{}, ctx.Err()
		}
		d.log().Warn("no bitmap for the new pack", zap.Stringer("repo", snap.Repo),
			zap.String("pack", info.Name), zap.Error(err))
	}
	return info, nil
}

// reachable lists every object reachable from the snapshot's refs.
func reachable(ctx context.Context, snap *Snapshot) (*walk.Result, error) {
	g := walk.NewGraph(snap.Objects(), repackMaxCommits)
	res, err := walk.Objects(ctx, g, walk.Request{Wants: refTips(snap.Refs)})
	if err != nil {
		return nil, fmt.Errorf("list reachable objects: %w", err)
	}
	return res, nil
}

// refGenCheck asserts that no ref update committed since gen was read.
func refGenCheck(gen []byte) refdb.Op {
	return refdb.Check(keyRefGen, gen, gen == nil)
}

// writeAndIndex streams WriteRepack (stored bytes, preferring delta copies
// over the whole duplicates pushed thin packs carry), or with search
// WriteRepackDeltas, straight into IndexPack, so the new pack is written
// to disk once and never held in memory.
func writeAndIndex(ctx context.Context, set *pack.Set, ids []object.ID, search *pack.DeltaSearchOptions, dir string, progress pack.ProgressFunc) (*pack.Indexed, error) {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		var err error
		if search != nil {
			_, err = set.WriteRepackDeltas(ctx, pw, ids, *search)
		} else {
			_, err = set.WriteRepack(ctx, pw, ids, pack.DefaultRepackDepth, progress)
		}
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
	DeletedPacks int   // of them, pack files
	DeletedBytes int64 // their size
	KeptYoung    int   // unlisted objects kept because they are younger than minAge
	Retired      int   // retired packs whose grace period ended (entries removed)
	// AbortedUploads counts unfinished uploads aborted: S3 multipart
	// uploads of writers killed mid-write, older than staleUploadAge.
	AbortedUploads int
}

// staleUploadAge is how long ago an unfinished upload under a
// repository's objects must have started for garbage collection to abort
// it: longer than any push, repack or LFS upload takes to send its bytes,
// so only a dead writer's is taken (not minAge: an hour is too short for
// a huge push). The file store removes its crashed writers' temporary
// files at the same age.
const staleUploadAge = 24 * time.Hour

// GCPlan is the database half of a garbage collection, handed to its
// store half (Collect): which packs to keep.
type GCPlan struct {
	Repo    names.Repo
	Now     time.Time
	MinAge  time.Duration
	Listed  int // packs listed in the database
	Retired int // retired entries dropped because their grace period ended
	// Keep names the packs whose objects stay: every listed pack and every
	// pack retired less than MinAge ago. Empty: none (no database).
	Keep []string
}

// PlanGC is the database half of a garbage collection, run by the
// repository's writer (the repo actor): it drops the "retired/" entries
// older than minAge and returns what the store half must keep. It touches
// no pack object, so it is quick; Collect does the listing and deleting
// outside the actor.
func (r *Repo) PlanGC(ctx context.Context, now time.Time, minAge time.Duration) (GCPlan, error) {
	v := r.db.View()
	keep := map[string]bool{}
	for k := range v.Scan(prefixPack) {
		keep[strings.TrimPrefix(k, prefixPack)] = true
	}
	plan := GCPlan{Repo: r.name, Now: now, MinAge: minAge, Listed: len(keep)}
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
	if len(txn) > 0 {
		if _, err := r.db.Commit(ctx, txn); err != nil {
			return GCPlan{}, fmt.Errorf("gc %s: drop retired entries: %w", r.name, err)
		}
		plan.Retired = len(txn) / 2
	}
	plan.Keep = slices.Sorted(maps.Keys(keep))
	return plan, nil
}

// PlanOrphanGC plans the collection of a repository whose database does
// not exist (leftovers of a crashed fork or delete): every pack object
// older than minAge is garbage. It opens no writer; if the database exists
// it fails, and the repository's writer must plan instead (PlanGC).
func PlanOrphanGC(ctx context.Context, d Deps, r names.Repo, now time.Time, minAge time.Duration) (GCPlan, error) {
	ok, err := Exists(ctx, d, r)
	if err != nil {
		return GCPlan{}, fmt.Errorf("gc %s: %w", r, err)
	}
	if ok {
		return GCPlan{}, fmt.Errorf("gc %s: %w: its writer must plan the collection", r, ErrExists)
	}
	return GCPlan{Repo: r, Now: now, MinAge: minAge}, nil
}

// Collect is the store half of a garbage collection: it deletes the pack
// objects of p's repository whose pack p does not keep and which are older
// than p.MinAge (rejected or crashed pushes, retired packs past their
// grace period; MinAge must exceed the longest push so a staged pack is
// never taken). It needs no database handle: run it outside the repo
// actor. Packs listed after the plan was made are younger than MinAge
// (they were just uploaded), so they are kept too. It then aborts the
// unfinished uploads under the repository's objects started more than
// staleUploadAge before p.Now (sweepUploads).
func Collect(ctx context.Context, d Deps, p GCPlan) (GCStats, error) {
	keep := make(map[string]bool, len(p.Keep))
	for _, name := range p.Keep {
		keep[name] = true
	}
	s, err := collect(ctx, d, p.Repo, p.Now, p.MinAge, keep)
	s.Listed, s.Retired = p.Listed, p.Retired
	if err != nil {
		return s, err
	}
	s.AbortedUploads, err = sweepUploads(ctx, d, p.Repo, p.Now.Add(-staleUploadAge))
	if err != nil {
		return s, fmt.Errorf("gc %s: %w", p.Repo, err)
	}
	return s, nil
}

// sweepUploads aborts, on a store whose writers leave unfinished uploads
// behind when killed (objstore.UploadSweeper: S3), those under r's objects
// prefix started before cutoff. The prefix holds everything of r that is
// written in parts: packs (a push's staged pack, a repack's Put), clone
// packs, and LFS objects a node receives (a client's presigned upload is
// one PUT and leaves no parts).
func sweepUploads(ctx context.Context, d Deps, r names.Repo, cutoff time.Time) (int, error) {
	sw, ok := objstore.UploadSweeperOf(d.Store)
	if !ok {
		return 0, nil
	}
	return sw.SweepUploads(ctx, objectsPrefix(r), cutoff)
}

// collect deletes objects under the repo's pack prefix whose pack is not
// in keep and which are older than minAge.
func collect(ctx context.Context, d Deps, r names.Repo, now time.Time, minAge time.Duration, keep map[string]bool) (GCStats, error) {
	var stats GCStats
	var doomed []objstore.ObjectInfo
	prefix := packPrefix(r)
	for info, err := range d.Store.List(ctx, prefix, "") {
		if err != nil {
			return stats, fmt.Errorf("gc %s: list: %w", r, err)
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
			return stats, fmt.Errorf("gc %s: %w", r, err)
		}
		stats.DeletedKeys++
		if strings.HasSuffix(info.Key, ".pack") {
			stats.DeletedPacks++
		}
		stats.DeletedBytes += info.Size
	}
	return stats, nil
}
