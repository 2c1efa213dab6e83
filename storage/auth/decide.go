package auth

import (
	"errors"

	"github.com/rgit/rgit/storage/names"
)

// ErrRepoNotFound is what a repository resolver returns (wrapped) when the
// repository does not exist. Front ends never show it as such to a caller
// who may not see private repositories; Decide turns it into a Decision.
var ErrRepoNotFound = errors.New("repository not found")

// RepoInfo is the metadata the access rules need about an existing
// repository.
type RepoInfo struct {
	Owner, Name string
	Public      bool
}

// Identity is the caller as established by the front end. An anonymous
// caller has Authenticated false (and Owner empty).
type Identity struct {
	Owner         string
	Authenticated bool
}

// Anonymous is the identity of a caller that presented no valid credential.
var Anonymous = Identity{}

// Access is what the caller wants to do with the repository.
type Access int

const (
	// Read: clone, fetch, ls-remote.
	Read Access = iota
	// Write: push.
	Write
	// Admin: settings, visibility, delete. Same rule as Write today; kept
	// separate so callers state their intent and the rule can diverge.
	Admin
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return "unknown"
}

// Decision is the outcome of an access check; each value maps to one HTTP
// status and one SSH message.
type Decision int

const (
	// Allow: go ahead.
	Allow Decision = iota
	// Unauthorized (HTTP 401 + WWW-Authenticate): the caller is anonymous
	// and authenticating could change the answer.
	Unauthorized
	// NotFound (HTTP 404): missing, or private and the caller may not read.
	NotFound
	// Forbidden (HTTP 403): the caller may read but not do this.
	Forbidden
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Unauthorized:
		return "unauthorized"
	case NotFound:
		return "not found"
	case Forbidden:
		return "forbidden"
	}
	return "unknown"
}

// Decide applies the access rules (DESIGN.md §6). found says whether the
// repository exists; repo is ignored when it does not.
//
// Rules:
//   - repositories are private unless repo.Public;
//   - the owner may do anything with their repository (owners compare
//     case-insensitively: credentials issued before the owner index may
//     carry another spelling of the same owner);
//   - anyone, anonymous included, may read a public repository;
//   - writes and admin need the owner.
//
// Denials never reveal whether a private repository exists:
//   - an anonymous caller gets Unauthorized both for a missing and for a
//     private repository, so git prompts for credentials in both cases and
//     the two are indistinguishable;
//   - an authenticated caller gets NotFound for both (their credentials were
//     accepted, so prompting again is pointless);
//   - Forbidden is only ever answered for repositories the caller can read
//     (public ones), whose existence is no secret; an anonymous write to a
//     public repository gets Unauthorized instead, so git prompts.
func Decide(id Identity, repo RepoInfo, found bool, acc Access) Decision {
	authenticated := id.Authenticated && id.Owner != ""
	isOwner := found && authenticated && names.Same(id.Owner, repo.Owner)
	if isOwner {
		return Allow
	}
	canRead := found && repo.Public
	if !canRead {
		if !authenticated {
			return Unauthorized
		}
		return NotFound
	}
	if acc == Read {
		return Allow
	}
	if !authenticated {
		return Unauthorized
	}
	return Forbidden
}
