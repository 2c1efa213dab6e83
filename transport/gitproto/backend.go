package gitproto

import (
	"context"
	"io"

	"github.com/rgit/rgit/storage/object"
)

// Ref is one advertised ref.
type Ref struct {
	Name   string
	ID     object.ID
	Peeled object.ID // zero unless Name is an annotated tag: the object it peels to
}

// RefSnapshot is a consistent view of a repository's refs.
type RefSnapshot struct {
	Refs []Ref  // sorted by Name, HEAD excluded
	Head string // HEAD's symref target, e.g. "refs/heads/main"; may be unborn
}

// Backend is the repository as the protocol sees it.
type Backend interface {
	// Snapshot returns the current refs.
	Snapshot(ctx context.Context) (RefSnapshot, error)
	// HasCommit reports whether the object exists (any type; it is used for
	// ACKs).
	HasCommit(ctx context.Context, id object.ID) bool
	// CheckWants returns nil if every want is a ref tip of snap or reachable
	// from one. For a bad want it returns an error wrapping ErrNotOurRef
	// (ideally a *NotOurRefError naming the id); any other error is treated
	// as an internal failure.
	CheckWants(ctx context.Context, snap RefSnapshot, wants []object.ID) error
	// OkToGiveUp reports whether every want has an ancestor among common
	// (git's ok_to_give_up). It may be conservative (false).
	OkToGiveUp(ctx context.Context, wants, common []object.ID) bool
	// PlanFetch computes what to send. Keep it cheap and do the heavy work
	// in WritePack: for a v0/v1 deepening fetch it is called twice, first
	// without haves to learn the shallow list that precedes negotiation, so
	// Shallow and Unshallow must not depend on Haves.
	PlanFetch(ctx context.Context, req FetchRequest) (FetchPlan, error)
	// Push applies a push. Pack (when non-nil) is the rest of the client's
	// stream: the backend must stop reading at the pack trailer, because a
	// full-duplex client sends nothing more until it reads the report.
	Push(ctx context.Context, req PushRequest) (PushResult, error)
}

// FetchRequest is a negotiated fetch.
type FetchRequest struct {
	Snapshot       RefSnapshot
	Wants          []object.ID
	Haves          []object.ID // only haves the server has (common)
	ClientShallow  []object.ID // the client's current shallow commits
	Depth          int         // deepen <n>; 0 = not requested
	DeepenSince    int64       // deepen-since <unix time>; 0 = not requested
	DeepenNot      []object.ID // deepen-not refs, resolved
	DeepenRelative bool
	Filter         string // raw filter-spec ("blob:none", "blob:limit=1k", "tree:0"); "" = none
	Thin           bool
	OfsDelta       bool
	IncludeTag     bool
	// PackURIProtocols are the URI schemes the client accepts for packs
	// it downloads itself (protocol v2 packfile-uris, e.g. "https");
	// empty when it accepts none or the backend offers none.
	PackURIProtocols []string
}

// Deepen reports whether the request changes the shallow boundary.
func (r *FetchRequest) Deepen() bool {
	return r.Depth > 0 || r.DeepenSince != 0 || len(r.DeepenNot) > 0
}

// FetchPlan is the result of PlanFetch. Shallow and Unshallow are sent in
// the shallow-info section (or the v0 shallow list) before the pack.
type FetchPlan interface {
	Shallow() []object.ID
	Unshallow() []object.ID
	// WritePack streams the pack to w. progress is nil when the client
	// asked for no progress; otherwise it takes human-readable text.
	WritePack(ctx context.Context, w io.Writer, progress io.Writer) error
	Close() error
}

// PackURIBackend is implemented by backends that may answer a protocol
// v2 fetch with packs the client downloads itself (packfile-uris): the
// capability is advertised when OffersPackURIs is true, the client's
// accepted schemes then reach PlanFetch in FetchRequest.PackURIProtocols,
// and the plan names the packs by implementing PackURIPlan.
type PackURIBackend interface {
	OffersPackURIs() bool
}

// PackURI is a whole pack the client downloads itself: Hash is the hex
// checksum of the pack (its name), which the client checks after the
// download.
type PackURI struct {
	Hash string
	URI  string
}

// PackURIPlan is implemented by a FetchPlan that leaves part of the
// answer to packs the client downloads: WritePack then writes only the
// objects those packs leave out. PackURIs is asked once, before the pack
// is written, and nil means none.
type PackURIPlan interface {
	PackURIs() []PackURI
}

// Command is one ref update of a push. Old or New is zero for create or
// delete.
type Command struct {
	Name     string
	Old, New object.ID
}

// PushRequest is a parsed push.
type PushRequest struct {
	Commands []Command
	Atomic   bool
	Options  []string  // push-options
	Pack     io.Reader // nil when the client sends no pack (deletes only)
	Progress io.Writer // band 2; nil when quiet or without side-band
}

// PushResult is the outcome of a push.
type PushResult struct {
	// UnpackErr non-nil reports "unpack <msg>" and fails every command.
	UnpackErr error
	// Results are in the order of PushRequest.Commands.
	Results []CommandResult
}

// CommandResult is the outcome of one command. Err is "" for success or
// git's reason text ("non-fast-forward", "atomic push failed", "missing
// necessary objects", "failed to update ref", ...).
type CommandResult struct {
	Name string
	Err  string
}
