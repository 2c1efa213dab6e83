// Package names is the one naming rule for owners and repositories
// (DESIGN.md §6): which names are valid, how a URL or SSH path names a
// repository, and which spellings are the same identity. Every entry point
// (admin, HTTP, SSH, the cluster's ownership map, the read API) checks
// names here, once, and carries the result as a Repo, so a repository
// that can be created can also be served.
//
// It imports nothing of rgit, so the lowest packages (cluster, storage)
// can use it.
package names

import (
	"cmp"
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

// Repo names a repository by a name that passed the naming rule: only
// New, Clean, Parse, ParseExact and UnmarshalText make one (each through
// Validate), so a Repo is valid by construction and the layers below the
// entry points (the gate, the engine, the actors, the cluster) never
// validate again. It is comparable: two values are == when spelled alike. Key is
// its identity (spellings differing in letter case are one repository);
// String is "owner/name" as spelled. The zero value names nothing.
type Repo struct{ owner, name string }

// New checks owner and name (Validate) and returns the repository they
// name, spelled as given.
func New(owner, name string) (Repo, error) {
	if err := Validate(owner, name); err != nil {
		return Repo{}, err
	}
	return Repo{owner: owner, name: name}, nil
}

// Clean validates an owner and a repository name as written in a URL or
// an SSH command, stripping one optional ".git" suffix from the name.
func Clean(owner, rawName string) (Repo, error) {
	return New(owner, strings.TrimSuffix(rawName, ".git"))
}

// Parse parses "owner/name" as an operator or a URL writes it (a
// trailing ".git" allowed) and validates it.
func Parse(s string) (Repo, error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok {
		return Repo{}, fmt.Errorf("%w: %q is not <owner>/<name>", ErrInvalid, s)
	}
	return Clean(owner, name)
}

// MustParse is Parse for names known to be valid (tests, constants); it
// panics on an invalid one.
func MustParse(s string) Repo {
	r, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

// Owner is the repository's owner, as spelled.
func (r Repo) Owner() string { return r.owner }

// Name is the repository's name within its owner, as spelled.
func (r Repo) Name() string { return r.name }

// String is "owner/name" as spelled: the form of logs, messages, the
// ownership map and object-store keys.
func (r Repo) String() string { return r.owner + "/" + r.name }

// Key is the repository's identity, "owner/name" folded (Fold): the same
// for every spelling of one repository.
func (r Repo) Key() string { return Fold(r.owner) + "/" + Fold(r.name) }

// Same reports whether r and o spell the same repository.
func (r Repo) Same(o Repo) bool { return Same(r.owner, o.owner) && Same(r.name, o.name) }

// Compare orders repositories by String (as sorted "owner/name" strings
// are), for slices.SortFunc, without building those strings: sorting a
// million repositories would otherwise allocate two per comparison.
func Compare(a, b Repo) int {
	if a.owner == b.owner {
		return strings.Compare(a.name, b.name)
	}
	n := min(len(a.owner), len(b.owner))
	if c := strings.Compare(a.owner[:n], b.owner[:n]); c != 0 {
		return c
	}
	// One owner is a prefix of the other (neither holds a '/'): the
	// shorter one's '/' meets the longer one's next byte.
	if len(a.owner) < len(b.owner) {
		return cmp.Compare('/', b.owner[n])
	}
	return cmp.Compare(a.owner[n], '/')
}

// IsZero reports whether r names nothing (the zero value).
func (r Repo) IsZero() bool { return r == Repo{} }

// MarshalText is String; the zero Repo has no text form.
func (r Repo) MarshalText() ([]byte, error) {
	if r.IsZero() {
		return nil, fmt.Errorf("%w: empty repository name", ErrInvalid)
	}
	return []byte(r.String()), nil
}

// UnmarshalText is ParseExact of b.
func (r *Repo) UnmarshalText(b []byte) error {
	v, err := ParseExact(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseExact reads String's form exactly ("owner/name", no ".git"
// stripped) and validates it: a Repo decoded from a message or a stored
// key is as valid as one made at an entry point. The Repo shares s's
// bytes (a million map keys are read this way at a leader's start).
func ParseExact(s string) (Repo, error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok {
		return Repo{}, fmt.Errorf("%w: %q is not <owner>/<name>", ErrInvalid, s)
	}
	return New(owner, name)
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
