package outbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/auth"
)

// Event kinds a hook subscribes to (the X-Rgit-Event header).
const (
	// KindPush: any ref updated, created or deleted, one event per ref
	// (the payload lists the new commits).
	KindPush = "push"
	// KindCreate: a branch or tag created.
	KindCreate = "create"
	// KindDelete: a branch or tag deleted.
	KindDelete = "delete"
	// KindTag: a tag (refs/tags/…) created, moved or deleted.
	KindTag = "tag"
	// KindVisibility: the repository made public or private.
	KindVisibility = "visibility"
	// KindAccess: a collaborator granted or revoked, a ref pattern
	// protected or unprotected.
	KindAccess = "access"
	// KindPing is what test-hook sends; no hook subscribes to it.
	KindPing = "ping"
)

// Kinds are the kinds a hook may subscribe to, in the order help lists
// them.
var Kinds = []string{KindPush, KindCreate, KindDelete, KindTag, KindVisibility, KindAccess}

// ErrBadEvents: an events list names an unknown kind or none.
var ErrBadEvents = errors.New("bad event list")

// ParseEvents reads a comma-separated list of kinds ("push,tag"); empty
// means push only. Duplicates are dropped; the result is in Kinds order.
func ParseEvents(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{KindPush}, nil
	}
	var out []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("%w: unknown event %q (events: %s)", ErrBadEvents, k, strings.Join(Kinds, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(Kinds, a) - slices.Index(Kinds, b) })
	return out, nil
}

// Actor is who made a change, as events name them: a user and the
// credential used (a token's id, a key's fingerprint), or a deploy key.
// Never a secret.
type Actor struct {
	User      string `json:"user,omitempty"`
	TokenID   string `json:"token_id,omitempty"`
	Key       string `json:"key,omitempty"`
	DeployKey string `json:"deploy_key,omitempty"`
}

// ActorOf names the caller id for events; an anonymous caller is the
// zero Actor.
func ActorOf(id auth.Identity) Actor {
	if !id.Authenticated {
		return Actor{}
	}
	return Actor{User: id.Owner, TokenID: id.TokenID, Key: id.Key, DeployKey: id.DeployKey}
}

// Event is one change as the outbox records it: what is cheap to know
// when the change commits. What costs a walk (the commits a push brought,
// whether it was forced) is computed when the event is delivered.
type Event struct {
	Kind  string    `json:"kind"`
	Time  time.Time `json:"time"`
	Actor Actor     `json:"actor"`
	// Ref events (push, create, delete, tag): the ref and its old and new
	// values (hex; empty for created and deleted).
	Ref    string `json:"ref,omitempty"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Visibility is "public" or "private" (visibility events).
	Visibility string `json:"visibility,omitempty"`
	// Access describes an access change (access events).
	Access *AccessChange `json:"access,omitempty"`
}

// AccessChange is what an access event changed.
type AccessChange struct {
	// Action is grant, revoke, protect or unprotect.
	Action string `json:"action"`
	// User, Role and Previous: a collaborator's grant or revoke (Role
	// empty when revoked, Previous empty when new).
	User     string `json:"user,omitempty"`
	Role     string `json:"role,omitempty"`
	Previous string `json:"previous,omitempty"`
	// Pattern and its restrictions: a protect or unprotect.
	Pattern     string `json:"pattern,omitempty"`
	NoForcePush bool   `json:"no_force_push,omitempty"`
	NoDelete    bool   `json:"no_delete,omitempty"`
}

// RefEvents are the events of one ref update (before or after zero for
// a creation or deletion; ids in hex): push always, create or delete when
// the ref appeared or went, tag for any change of a tag.
func RefEvents(ref, before, after string, actor Actor, now time.Time) []Event {
	e := Event{Ref: ref, Before: before, After: after, Actor: actor, Time: now}
	out := []Event{withKind(e, KindPush)}
	switch {
	case before == "":
		out = append(out, withKind(e, KindCreate))
	case after == "":
		out = append(out, withKind(e, KindDelete))
	}
	if strings.HasPrefix(ref, "refs/tags/") {
		out = append(out, withKind(e, KindTag))
	}
	return out
}

func withKind(e Event, kind string) Event {
	e.Kind = kind
	return e
}

// RefType is "branch", "tag" or "other", from a ref's name.
func RefType(ref string) string {
	switch {
	case strings.HasPrefix(ref, "refs/heads/"):
		return "branch"
	case strings.HasPrefix(ref, "refs/tags/"):
		return "tag"
	}
	return "other"
}
