// Package format is the one table of the versions rgit writes and reads:
// the records it stores (ref-database records, repository layouts,
// ownership entries and sessions, bitmap indexes, clone-pack keys) and the protocol its nodes
// speak to each other. Each reader asks Decide (or Check) before it
// interprets a version, so a node meeting a version it does not know
// refuses it with an error that names the format, the version and what
// this build reads, and never guesses at a layout.
//
// The compatibility promise (docs/operations.md, "Upgrades") follows from the table:
// a release reads every version the previous release wrote, and writes
// only versions the previous release reads, so a fleet of the two serves
// traffic during a rolling update and a downgrade reads what the newer
// release wrote. A new layout therefore ships in two releases: the first
// learns to read it (Newest grows), the second writes it.
//
// The package imports only the standard library.
package format

import (
	"errors"
	"fmt"
)

// Format is one versioned format: the versions this build reads are
// Oldest through Newest, and Write is the newest it writes. Prev is the
// same for the previous release, which the promise binds this build to:
// it reads Prev.Write, and writes nothing above Prev.Newest.
type Format struct {
	Name           string // as an operator reads it in a refusal
	Oldest, Newest uint32
	Write          uint32
	Prev           Release
}

// Release is what one release writes (the newest version) and reads
// (up to Newest) of a format.
type Release struct{ Write, Newest uint32 }

// The formats of this build, and of the previous release. A version
// missing where versions were not explicit yet counts as 1.
var (
	// RefDB: a ref-database log record or snapshot (storage/refdb; the
	// version byte after the "rgdb" magic).
	RefDB = Format{Name: "ref-database record", Oldest: 1, Newest: 1, Write: 1, Prev: Release{1, 1}}
	// OwnershipEntry: one repository's row in the ownership map
	// (cluster.Entry; version 1 a per-repository lease, 2 one bound to
	// a node session).
	OwnershipEntry = Format{Name: "ownership entry", Oldest: 1, Newest: 2, Write: 2, Prev: Release{2, 2}}
	// OwnershipSession: a node session in the ownership map
	// (cluster.NodeSession).
	OwnershipSession = Format{Name: "ownership session", Oldest: 1, Newest: 1, Write: 1, Prev: Release{1, 1}}
	// Repository: the layout of the keys and values in a repository's
	// database (storage/repo; meta/format, absent: 1). A release that
	// changes what an older one would misread there writes a new
	// version; readers refuse a repository whose version they do not
	// read before interpreting anything else in it.
	Repository = Format{Name: "repository layout", Oldest: 1, Newest: 1, Write: 1, Prev: Release{1, 1}}
	// Bitmap: a reachability bitmap index (storage/bitmap; version 1 the
	// first trailer, 2 a whole-repository index, 3 a layer over bases).
	// A whole-repository index is written as 2, a layer as 3.
	Bitmap = Format{Name: "bitmap index", Oldest: 1, Newest: 3, Write: 3, Prev: Release{3, 3}}
	// ClonePack: the layout of a cached clone pack's key inputs
	// (transport/service/fetchpack). A pack is found only by its key, so a node
	// never reads a pack of another version: it builds its own.
	ClonePack = Format{Name: "clone pack", Oldest: 1, Newest: 1, Write: 1, Prev: Release{1, 1}}
	// Peer: the node-to-node protocol on the peer ports (transport/frontend/peer:
	// message envelopes, forwarded sessions and HTTP). Messages and
	// replies are JSON: a newer release may add fields an older one
	// ignores, only when ignoring them keeps the older meaning; anything
	// else is a new version. The previous release sends no version (1)
	// and ignores the one this build sends.
	Peer = Format{Name: "peer protocol", Oldest: 1, Newest: 1, Write: 1, Prev: Release{1, 1}}
)

// All lists every format, for documentation and tests.
var All = []Format{RefDB, Repository, OwnershipEntry, OwnershipSession, Bitmap, ClonePack, Peer}

// Verdict is what a reader does with a version.
type Verdict int

const (
	// Read: this build reads the version.
	Read Verdict = iota
	// TooNew: a newer release wrote it; refuse (this node must be
	// upgraded, or the newer release rolled back before its writes).
	TooNew
	// TooOld: older than anything this build reads; refuse (upgrade
	// through the releases in between).
	TooOld
)

func (v Verdict) String() string {
	switch v {
	case Read:
		return "read"
	case TooNew:
		return "too new"
	case TooOld:
		return "too old"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Decide says whether this build reads version v of f. Version 0 is
// never written, so it is TooOld.
func (f Format) Decide(v uint32) Verdict {
	switch {
	case v > f.Newest:
		return TooNew
	case v < f.Oldest || v == 0:
		return TooOld
	}
	return Read
}

// ErrUnsupported is wrapped by every refusal of a version (a
// *VersionError), so callers can tell it from damage.
var ErrUnsupported = errors.New("unsupported format version")

// VersionError is a version this build refuses to read.
type VersionError struct {
	Format  Format
	Version uint32
	Verdict Verdict
}

func (e *VersionError) Error() string {
	what := "is from a newer rgit release (this one reads versions %d to %d); run that release or newer here"
	if e.Verdict == TooOld {
		what = "is older than this rgit reads (versions %d to %d); upgrade through the releases in between"
	}
	return fmt.Sprintf("%s version %d "+what, e.Format.Name, e.Version, e.Format.Oldest, e.Format.Newest)
}

func (e *VersionError) Unwrap() error { return ErrUnsupported }

// Check is Decide as an error: nil when this build reads v, a
// *VersionError otherwise.
func (f Format) Check(v uint32) error {
	if d := f.Decide(v); d != Read {
		return &VersionError{Format: f, Version: v, Verdict: d}
	}
	return nil
}
