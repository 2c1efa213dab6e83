package repo

import (
	"context"
	"fmt"

	"github.com/rgit/rgit/storage/names"
)

// Git LFS objects live under the repository's own objects prefix, like
// its packs, so repositories never share storage, deleting a repository
// deletes them (Delete removes everything under the prefix) and a fork
// copies them (Fork):
//
//	objects/{owner}/{name}/lfs/{oid}
//
// One flat prefix: S3 spreads keys by their bytes anyway, and on the file
// store an upload then creates no directories (each new one costs an
// fsync of its parent).
// An object is its content's SHA-256 (the oid); it is written only whole
// and checked (transport/product/lfs), and never changes. Garbage collection
// leaves lfs/ alone: an object no pointer refers to any more stays until
// the repository is deleted.

// ValidLFSOID reports whether oid is a Git LFS object id: a SHA-256 in 64
// lowercase hex digits.
func ValidLFSOID(oid string) bool {
	if len(oid) != 64 {
		return false
	}
	for i := 0; i < len(oid); i++ {
		if c := oid[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LFSPrefix is where r's Git LFS objects are stored.
func LFSPrefix(r names.Repo) string { return "objects/" + r.String() + "/lfs/" }

// LFSKey is the store key of r's Git LFS object oid, which must be valid
// (ValidLFSOID).
func LFSKey(r names.Repo, oid string) string { return LFSPrefix(r) + oid }

// copyLFS copies every Git LFS object of src to dst inside the store
// (server-side on S3) and returns how many it copied.
func copyLFS(ctx context.Context, d Deps, from, to names.Repo) (int, error) {
	src, dst := LFSPrefix(from), LFSPrefix(to)
	var keys []string
	for info, err := range d.Store.List(ctx, src, "") {
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", src, err)
		}
		keys = append(keys, info.Key)
	}
	for _, k := range keys {
		if err := d.Store.Copy(ctx, k, dst+k[len(src):]); err != nil {
			return 0, fmt.Errorf("copy %s: %w", k, err)
		}
	}
	return len(keys), nil
}
