package auth

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// Protection is one protected ref pattern of a repository.
type Protection struct {
	// Pattern is a full ref name, or a path.Match pattern whose "*" does
	// not cross "/" ("refs/heads/release/*" protects release/1.0, not
	// release/1.0/fix).
	Pattern     string    `json:"pattern"`
	NoForcePush bool      `json:"noForcePush"`
	NoDelete    bool      `json:"noDelete"`
	CreatedBy   string    `json:"createdBy"`
	Created     time.Time `json:"created"`
}

// ErrBadPattern: a protection pattern that names no ref.
var ErrBadPattern = errors.New("invalid protected ref pattern")

// ValidatePattern checks that p can name refs: it starts with "refs/" and
// is valid path.Match syntax.
func ValidatePattern(p string) error {
	if !strings.HasPrefix(p, "refs/") || len(p) > 1024 || strings.ContainsAny(p, " \t\n\x00") {
		return fmt.Errorf("%w %q: must start with refs/ and contain no spaces", ErrBadPattern, p)
	}
	if _, err := path.Match(p, "refs/"); err != nil {
		return fmt.Errorf("%w %q: %w", ErrBadPattern, p, err)
	}
	return nil
}

// Matches reports whether the pattern covers ref.
func (p Protection) Matches(ref string) bool {
	ok, err := path.Match(p.Pattern, ref)
	return err == nil && ok
}

// UpdateKind is what a push command does to a ref.
type UpdateKind int

const (
	// Create: the ref did not exist.
	Create UpdateKind = iota
	// FastForward: the old value is an ancestor of the new one.
	FastForward
	// Force: the old value is not an ancestor of the new one (git's
	// definition of a forced update; also when either is not a commit).
	Force
	// Delete: the ref is removed.
	Delete
	// Recreate: the ref did not exist, but was deleted while a
	// no-force-push rule covered it, and its new value does not contain
	// the value it was deleted at. Deleting and creating again would
	// otherwise rewrite a branch that may not be force-pushed.
	Recreate
)

var kindNames = [...]string{Create: "create", FastForward: "fast-forward", Force: "force-push", Delete: "delete", Recreate: "re-create"}

func (k UpdateKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// CheckUpdate returns "" if the rules allow an update of kind to ref, or
// the reason git shows after "ng <ref> " ("protected branch: …"). Rules
// combine: any matching rule that forbids the update refuses it. Creating
// a ref and fast-forwarding it are always allowed; NoForcePush refuses
// Force and Recreate, NoDelete refuses Delete. A ref needs its deleted
// value kept (to tell a Recreate) exactly when a Force of it is refused.
func CheckUpdate(rules []Protection, ref string, kind UpdateKind) string {
	for _, p := range rules {
		if !p.Matches(ref) {
			continue
		}
		switch {
		case kind == Force && p.NoForcePush:
			return "protected branch: force-push not allowed (" + p.Pattern + ")"
		case kind == Delete && p.NoDelete:
			return "protected branch: deletion not allowed (" + p.Pattern + ")"
		case kind == Recreate && p.NoForcePush:
			return "protected branch: force-push not allowed, re-creating a deleted branch must fast-forward its last value (" + p.Pattern + ")"
		}
	}
	return ""
}
