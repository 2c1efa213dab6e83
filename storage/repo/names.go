package repo

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: the repository does not exist.
	ErrNotFound = errors.New("repository not found")
	// ErrExists: the repository already exists.
	ErrExists = errors.New("repository already exists")
	// ErrInvalidName: an owner or repository name is not acceptable.
	ErrInvalidName = errors.New("invalid repository name")
)

// maxNameLen bounds owner and repository names (object-store keys have a
// 1024-byte limit; this leaves room for ref names).
const maxNameLen = 100

// ValidateName checks an owner and a repository name: [A-Za-z0-9._-]+,
// not "." or "..", not ending in ".lock" or ".git" (URLs strip an optional
// ".git", so such a name could not be addressed); owner "api" is reserved.
func ValidateName(owner, name string) error {
	if err := validateComponent("owner", owner); err != nil {
		return err
	}
	if owner == "api" {
		return fmt.Errorf("%w: owner %q is reserved", ErrInvalidName, owner)
	}
	return validateComponent("name", name)
}

func validateComponent(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidName, what)
	case len(s) > maxNameLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidName, what, maxNameLen)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s %q", ErrInvalidName, what, s)
	case strings.HasSuffix(s, ".lock"), strings.HasSuffix(s, ".git"):
		return fmt.Errorf("%w: %s %q may not end in .lock or .git", ErrInvalidName, what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q contains %q", ErrInvalidName, what, s, c)
		}
	}
	return nil
}

// Database keys (DESIGN.md §4).
const (
	keyHead       = "head"
	keyVisibility = "meta/visibility"
	keyCreated    = "meta/created"
	// keyRefGen changes with every ref update, so a long operation (repack)
	// can assert in its commit that no ref moved since it started.
	keyRefGen     = "meta/refgen"
	prefixRef     = "ref/"
	prefixPack    = "pack/"
	prefixRetired = "retired/"

	defaultHead = "refs/heads/main"
	visPublic   = "public"
	visPrivate  = "private"
)

func dbPrefix(owner, name string) string { return "repo/" + owner + "/" + name }

// objectsPrefix ends in '/' so "a/b" never matches "a/bc".
func objectsPrefix(owner, name string) string { return "objects/" + owner + "/" + name + "/" }

func packPrefix(owner, name string) string { return objectsPrefix(owner, name) + "pack/" }

// PackKeys returns the object-store keys of a pack ("pack-<hex>") and its index.
func PackKeys(owner, name, packName string) (packKey, idxKey string) {
	base := packPrefix(owner, name) + packName
	return base + ".pack", base + ".idx"
}

// BitmapKey returns the object-store key of a pack's reachability bitmap
// (optional; see storage/bitmap), next to the pack.
func BitmapKey(owner, name, packName string) string {
	return packPrefix(owner, name) + packName + ".bitmap"
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
