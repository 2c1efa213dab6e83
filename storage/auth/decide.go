package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// ErrRepoNotFound is what a repository resolver returns (wrapped) when the
// repository does not exist. Front ends never show it as such to a caller
// who may not see private repositories; Decide turns it into a Decision.
var ErrRepoNotFound = errors.New("repository not found")

// Role is what a user may do with a repository. Roles are ordered: each
// includes the ones below it.
type Role int

const (
	// NoRole: nothing beyond what the repository's visibility allows.
	NoRole Role = iota
	// RoleRead: clone and fetch, also when the repository is private.
	RoleRead
	// RoleWrite: push (subject to protected branches).
	RoleWrite
	// RoleAdmin: also visibility, protection and collaborators.
	RoleAdmin
)

var roleNames = [...]string{NoRole: "none", RoleRead: "read", RoleWrite: "write", RoleAdmin: "admin"}

func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return "unknown"
	}
	return roleNames[r]
}

// ErrBadRole: ParseRole was given something other than read, write or admin.
var ErrBadRole = errors.New("role must be read, write or admin")

// ParseRole parses "read", "write" or "admin".
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if r != int(NoRole) && n == s {
			return Role(r), nil
		}
	}
	return NoRole, fmt.Errorf("%w, not %q", ErrBadRole, s)
}

// MarshalText and UnmarshalText store roles by name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	*r = v
	return err
}

// Grant gives User a Role on one repository (a collaborator).
type Grant struct {
	User      string    `json:"user"`
	Role      Role      `json:"role"`
	CreatedBy string    `json:"createdBy"`
	Created   time.Time `json:"created"`
}

// RepoInfo is a repository's settings. Decide reads the name,
// visibility and collaborators, which the name index holds too, so access
// is decided before the repository is opened; the database holds the
// rest (HEAD, creation time, protected refs), known once it is open.
type RepoInfo struct {
	// Repo is the repository under its canonical spelling.
	Repo   names.Repo
	Public bool
	// Grants are the collaborators (one entry per user at most).
	Grants []Grant
	// From the database only:
	Head    string
	Created time.Time
	// Protections are the protected ref patterns; a list the database
	// cannot decode reads as empty here, and fails the changes and pushes
	// that need it.
	Protections []Protection
}

// Identity is the caller as established by the front end from a
// credential. The zero value is Anonymous.
type Identity struct {
	// Owner is the user the credential belongs to; "" for anonymous
	// callers and for deploy keys, which act for no user.
	Owner         string `json:"owner,omitempty"`
	Authenticated bool   `json:"authenticated,omitempty"`
	// ReadOnly: the credential may only read (a read-scoped token, a
	// deploy key without write), whatever its user's role.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Repos, when not empty, limits the credential to these repositories
	// ("owner/name", any letter case): elsewhere it counts as a stranger's.
	Repos []string `json:"repos,omitempty"`
	// DeployKey is the fingerprint of a deploy key: it has write access
	// (read if ReadOnly) to Repos, its single repository, and nothing else.
	DeployKey string `json:"deployKey,omitempty"`
	// TokenID (a token's public id, as list-tokens shows it) or Key (a
	// user key's fingerprint) names the credential used, for the record
	// of who did something (webhook events); never part of a decision.
	TokenID string `json:"tokenId,omitempty"`
	Key     string `json:"key,omitempty"`
}

// Anonymous is the identity of a caller that presented no valid credential.
var Anonymous = Identity{}

// Who names the caller for logs: the user, the deploy key, or "anonymous".
func (id Identity) Who() string {
	switch {
	case !id.authenticated():
		return "anonymous"
	case id.DeployKey != "":
		return "deploy-key " + id.DeployKey
	}
	return id.Owner
}

func (id Identity) authenticated() bool {
	return id.Authenticated && (id.Owner != "" || id.DeployKey != "")
}

// covers reports whether the credential may be used on repo at all.
func (id Identity) covers(repo RepoInfo) bool {
	if len(id.Repos) == 0 {
		return id.DeployKey == "" // a deploy key without a repository covers nothing
	}
	for _, r := range id.Repos {
		if r, err := names.Parse(r); err == nil && r.Same(repo.Repo) {
			return true
		}
	}
	return false
}

// Access is what the caller wants to do with the repository.
type Access int

const (
	// Read: clone, fetch, ls-remote, the read API.
	Read Access = iota
	// Write: push.
	Write
	// Admin: visibility, protection, collaborators.
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

// needs is the role an access requires.
func (a Access) needs() Role {
	switch a {
	case Read:
		return RoleRead
	case Write:
		return RoleWrite
	}
	return RoleAdmin
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

// RoleOf is the role id has on repo: the owner is admin; a collaborator
// has their grant; a deploy key has write (read if read-only) on its
// repository; anyone has read on a public repository. The credential's
// limits apply last: outside its Repos it is a stranger's, and a
// read-only credential never exceeds read.
func RoleOf(id Identity, repo RepoInfo) Role {
	role := NoRole
	if id.authenticated() && id.covers(repo) {
		switch {
		case id.DeployKey != "":
			role = RoleWrite
		case names.Same(id.Owner, repo.Repo.Owner()):
			// Owners compare case-insensitively: credentials issued
			// before the owner index may carry another spelling.
			role = RoleAdmin
		default:
			for _, g := range repo.Grants {
				if names.Same(g.User, id.Owner) {
					role = g.Role
				}
			}
		}
		if id.ReadOnly && role > RoleRead {
			role = RoleRead
		}
	}
	if repo.Public && role < RoleRead {
		role = RoleRead
	}
	return role
}

// Decide is rgit's one access decision (DESIGN.md §6): HTTP, SSH, the read
// API and rgit-admin's --as all call it. found says whether the
// repository exists; repo is ignored when it does not.
//
//	role (RoleOf)     anonymous caller      authenticated caller
//	>= needed         Allow                 Allow
//	read, < needed    Unauthorized          Forbidden
//	none / missing    Unauthorized          NotFound
//
// Denials never reveal whether a private repository exists:
//   - an anonymous caller gets Unauthorized both for a missing and for a
//     private repository, so git prompts for credentials in both cases and
//     the two are indistinguishable;
//   - an authenticated caller gets NotFound for both (their credentials were
//     accepted, so prompting again is pointless);
//   - Forbidden is only ever answered for repositories the caller can read,
//     whose existence is no secret to them; an anonymous write to a public
//     repository gets Unauthorized instead, so git prompts.
func Decide(id Identity, repo RepoInfo, found bool, acc Access) Decision {
	role := NoRole
	if found {
		role = RoleOf(id, repo)
	}
	switch {
	case role >= acc.needs():
		return Allow
	case !id.authenticated():
		return Unauthorized
	case role == NoRole:
		return NotFound
	}
	return Forbidden
}

type identityKey struct{}

// WithIdentity returns ctx carrying the caller's identity, for the layers
// below a session that log who did what (audit).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity WithIdentity stored, or Anonymous.
func IdentityFrom(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}
