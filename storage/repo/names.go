package repo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rgit/rgit/storage/names"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: the repository does not exist.
	ErrNotFound = errors.New("repository not found")
	// ErrExists: the repository already exists (in any letter case).
	ErrExists = errors.New("repository already exists")
	// ErrInvalidName: an owner or repository name breaks the naming rule
	// (storage/names).
	ErrInvalidName = names.ErrInvalid
)

// Database keys (DESIGN.md §4).
const (
	keyHead       = "head"
	keyVisibility = "meta/visibility"
	keyCreated    = "meta/created"
	// keyFormat holds the layout version of the database
	// (format.Repository) in decimal; absent: 1.
	keyFormat = "meta/format"
	// keyRefGen changes with every ref update, so a long operation (repack)
	// can assert in its commit that no ref moved since it started.
	keyRefGen     = "meta/refgen"
	prefixRef     = "ref/"
	prefixPack    = "pack/"
	prefixRetired = "retired/"
	// prefixDeleted holds the last value of each ref deleted while a
	// no-force-push rule covered it: creating it again must fast-forward
	// from there (access.go).
	prefixDeleted = "deleted/"

	defaultHead = "refs/heads/main"
	visPublic   = "public"
	visPrivate  = "private"
)

func dbPrefix(r names.Repo) string { return "repo/" + r.String() }

// objectsPrefix ends in '/' so "a/b" never matches "a/bc".
func objectsPrefix(r names.Repo) string { return "objects/" + r.String() + "/" }

func packPrefix(r names.Repo) string { return objectsPrefix(r) + "pack/" }

// ClonePackPrefix is where the clone-pack cache shares the repository's
// built clone packs between nodes (storage/clonecache): under the objects
// prefix, so deleting the repository deletes them, and beside pack/, so
// garbage collection of packs leaves them alone.
func ClonePackPrefix(r names.Repo) string { return objectsPrefix(r) + "clonepack/" }

// PackKeys returns the object-store keys of a pack ("pack-<hex>") and its index.
func PackKeys(r names.Repo, packName string) (packKey, idxKey string) {
	base := packPrefix(r) + packName
	return base + ".pack", base + ".idx"
}

// BitmapKey returns the object-store key of a pack's reachability bitmap
// (optional; see storage/bitmap), next to the pack.
func BitmapKey(r names.Repo, packName string) string {
	return packPrefix(r) + packName + ".bitmap"
}

// validateRefName is a light check; the protocol layer applies git's full
// check-ref-format rules before a name gets here.
func validateRefName(ref string) error {
	if !strings.HasPrefix(ref, "refs/") || len(ref) <= len("refs/") || len(ref) > 900 {
		return fmt.Errorf("invalid ref name %q", ref)
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; c < 0x20 || c == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' || c == '\\' {
			return fmt.Errorf("invalid ref name %q", ref)
		}
	}
	if strings.Contains(ref, "..") || strings.Contains(ref, "//") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".lock") {
		return fmt.Errorf("invalid ref name %q", ref)
	}
	return nil
}
