// Package names is the one naming rule for owners and repositories
// (DESIGN.md §6): which names are valid, how a URL or SSH path names a
// repository, and which spellings are the same identity. Every entry point
// (admin, HTTP, SSH, the cluster's ownership map, the read API) checks
// names here, so a repository that can be created can also be served.
//
// It imports nothing of rgit, so the lowest packages (cluster, storage)
// can use it.
package names

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid: an owner or repository name breaks the naming rule.
var ErrInvalid = errors.New("invalid name")

// MaxLen bounds owner and repository names; it keeps object-store keys
// (1024 bytes on S3, with room for ref names) and log lines short.
const MaxLen = 100

// ReservedOwner would shadow the read API's /api/ prefix; it is refused in
// any letter case, since identity is case-insensitive.
const ReservedOwner = "api"

// Validate checks an owner and a repository name:
//   - each is [A-Za-z0-9._-]+, at most MaxLen bytes, not "." or "..";
//   - neither ends in ".git" (a URL's optional ".git" is stripped once, so
//     such a name would be reached by two spellings) nor ".lock";
//   - the owner is not "api" in any letter case.
func Validate(owner, name string) error {
	if err := ValidateOwner(owner); err != nil {
		return err
	}
	return component("name", name)
}

// ValidateOwner checks an owner name alone (credentials are per owner).
func ValidateOwner(owner string) error {
	if err := component("owner", owner); err != nil {
		return err
	}
	if strings.EqualFold(owner, ReservedOwner) {
		return fmt.Errorf("%w: owner %q is reserved", ErrInvalid, owner)
	}
	return nil
}

// Clean validates an owner and a repository name as written in a URL or
// an SSH command, stripping one optional ".git" suffix from the name.
func Clean(owner, rawName string) (string, string, error) {
	name := strings.TrimSuffix(rawName, ".git")
	if err := Validate(owner, name); err != nil {
		return "", "", err
	}
	return owner, name, nil
}

// Split parses "owner/name" (a trailing ".git" allowed) and validates it.
func Split(s string) (string, string, error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not <owner>/<name>", ErrInvalid, s)
	}
	return Clean(owner, name)
}

// Fold is the identity of a name: two spellings that differ only in
// letter case are the same owner or repository. Only ASCII letters occur
// in valid names, so this is a plain ASCII lower-casing.
func Fold(s string) string { return strings.ToLower(s) }

// Same reports whether a and b spell the same identity.
func Same(a, b string) bool { return strings.EqualFold(a, b) }

func component(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > MaxLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, what, MaxLen)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s %q", ErrInvalid, what, s)
	case strings.HasSuffix(s, ".lock"), strings.HasSuffix(s, ".git"):
		return fmt.Errorf("%w: %s %q may not end in .lock or .git", ErrInvalid, what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q contains %q", ErrInvalid, what, s, c)
		}
	}
	return nil
}
