package repo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/refdb"
)

// Delete destroys the repository: its database, every object under
// objects/{owner}/{name}/ and every unfinished upload there (a killed
// node's: no garbage collection visits a deleted repository), and its
// packs in the local cache. It is
// retryable: a repeat finishes a half-done delete. ErrNotFound only when
// nothing at all was left. The caller must have stopped the repository's
// writer (the database is destroyed underneath it).
func Delete(ctx context.Context, d Deps, r names.Repo) error {
	exists, err := refdb.Exists(ctx, d.Store, dbPrefix(r))
	if err != nil {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	// The database goes first so the repository disappears as a whole;
	// leftover objects are then only garbage. The index entry goes last,
	// so no case variant can be created while objects of this one remain.
	if exists {
		if err := refdb.Destroy(ctx, d.Store, dbPrefix(r)); err != nil {
			return fmt.Errorf("delete %s: destroy database: %w", r, err)
		}
	}
	n, err := deleteObjects(ctx, d, objectsPrefix(r))
	if err != nil {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	// Its writer is stopped: any upload left is a dead one, whatever its
	// age. Failing to abort them (a credential without
	// s3:ListBucketMultipartUploads) does not stop the delete: they are
	// invisible, and a bucket lifecycle rule can still take them.
	aborted, err := sweepUploads(ctx, d, r, time.Now())
	if err != nil {
		d.log().Warn("delete: unfinished uploads not aborted; they stay until a bucket lifecycle rule removes them",
			zap.Stringer("repo", r), zap.Error(err))
	}
	// Its webhook deliveries went with the database.
	if err := ClearMarkers(ctx, d, r); err != nil {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	indexed, err := deleteMeta(ctx, d, r)
	if err != nil {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	if !exists && n == 0 && aborted == 0 && !indexed {
		return fmt.Errorf("delete %s: %w", r, ErrNotFound)
	}
	d.log().Info("repository deleted", zap.Stringer("repo", r), zap.Int("objects", n), zap.Int("aborted_uploads", aborted))
	return nil
}

// deleteObjects deletes every key under prefix, dropping deleted packs
// from the cache, and returns how many keys it deleted.
func deleteObjects(ctx context.Context, d Deps, prefix string) (int, error) {
	var keys []string
	for info, err := range d.Store.List(ctx, prefix, "") {
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	for _, k := range keys {
		if err := deleteKey(ctx, d, k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// deleteKey deletes one object and, for a pack, its cached copy. A fork
// shares pack names with its source, so a fork may re-download afterwards;
// correct, just not free.
func deleteKey(ctx context.Context, d Deps, key string) error {
	if err := d.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if name, ok := packNameOfKey(key); ok && d.Cache != nil && strings.HasSuffix(key, ".pack") {
		if err := d.Cache.Remove(name); err != nil {
			d.log().Warn("drop cached pack", zap.String("pack", name), zap.Error(err))
		}
	}
	return nil
}

// packNameOfKey maps ".../pack/pack-<hex>.pack|.idx|.bitmap" to
// "pack-<hex>", so GC keeps or drops a bitmap with its pack.
func packNameOfKey(key string) (string, bool) {
	base := key[strings.LastIndexByte(key, '/')+1:]
	for _, ext := range []string{".pack", ".idx", ".bitmap"} {
		if n, ok := strings.CutSuffix(base, ext); ok && strings.HasPrefix(n, "pack-") {
			return n, true
		}
	}
	return "", false
}

// Fork creates dst as a copy of src: every listed pack, index
// and bitmap, and every Git LFS object, is copied inside the store
// (server-side on S3), then the new
// database is created with the same refs, HEAD and pack list, private.
// The fork shares no objects with its source afterwards. ErrExists if dst
// exists in any letter case.
func Fork(ctx context.Context, d Deps, src *Snapshot, dst names.Repo) error {
	ok, err := refdb.Exists(ctx, d.Store, dbPrefix(dst))
	if err != nil {
		return fmt.Errorf("fork %s to %s: %w", src.Repo, dst, err)
	}
	if ok {
		return fmt.Errorf("fork to %s: %w", dst, ErrExists)
	}
	if err := claimName(ctx, d, dst); err != nil {
		return fmt.Errorf("fork to %s: %w", dst, err)
	}
	for _, p := range src.Packs {
		sp, si := PackKeys(src.Repo, p.Name)
		dp, di := PackKeys(dst, p.Name)
		// Index last, as a push uploads: a pack key implies nothing yet.
		for _, kv := range [][2]string{{sp, dp}, {si, di}} {
			if err := d.Store.Copy(ctx, kv[0], kv[1]); err != nil {
				return fmt.Errorf("fork %s to %s: copy %s: %w", src.Repo, dst, kv[0], err)
			}
		}
		// The bitmap is optional: most packs have none.
		sb := BitmapKey(src.Repo, p.Name)
		if err := d.Store.Copy(ctx, sb, BitmapKey(dst, p.Name)); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("fork %s to %s: copy %s: %w", src.Repo, dst, sb, err)
		}
	}
	// Git LFS objects too: the fork shares no storage with its source.
	// Objects uploaded to the source while this runs may be left out,
	// as pushes that land meanwhile are.
	n, err := copyLFS(ctx, d, src.Repo, dst)
	if err != nil {
		return fmt.Errorf("fork %s to %s: %w", src.Repo, dst, err)
	}
	if n > 0 {
		d.log().Info("fork copied Git LFS objects", zap.Stringer("repo", dst), zap.Int("objects", n))
	}
	// A failure from here leaves copied packs no database lists: GC (or a
	// Delete of the name) removes them; copied LFS objects, a Delete of
	// the name.
	txn := refdb.Txn{
		refdb.Create(keyCreated, []byte(d.now().UTC().Format(time.RFC3339))),
		refdb.Create(keyHead, []byte(src.Head)),
		refdb.Create(keyVisibility, []byte(visPrivate)),
	}
	for _, ref := range src.Refs {
		txn = append(txn, refdb.Create(prefixRef+ref.Name, []byte(ref.ID.String())))
	}
	for _, p := range src.Packs {
		txn = append(txn, refdb.Create(prefixPack+p.Name, p.encode()))
	}
	return createDB(ctx, d, dst, txn)
}

// List returns the name ("owner/name") of every repository, sorted.
func List(ctx context.Context, d Deps) ([]string, error) {
	seen := map[string]bool{}
	var names []string
	for info, err := range d.Store.List(ctx, "repo/", "") {
		if err != nil {
			return nil, fmt.Errorf("list repositories: %w", err)
		}
		parts := strings.SplitN(strings.TrimPrefix(info.Key, "repo/"), "/", 3)
		if len(parts) < 3 {
			continue
		}
		if n := parts[0] + "/" + parts[1]; !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}
