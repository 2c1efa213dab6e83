package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/names"
)

// ErrCorruptEntry: stored bytes are not a valid encoded Entry.
var ErrCorruptEntry = errors.New("cluster: corrupt ownership entry")

// KeyPrefix is the refdb key prefix of ownership entries: "own/{owner}/{name}".
const KeyPrefix = "own/"

// entryVersion is the first byte of an encoded per-repository Entry,
// boundVersion that of an entry bound to a session. Decoding refuses any
// version format.OwnershipEntry does not read, so an old binary never
// misreads a newer layout.
const (
	entryVersion = 1
	boundVersion = 2
)

// Entry is one repo's row in the ownership map.
type Entry struct {
	// Node owns the repo until Expires.
	Node string
	// Expires is when the lease lapses unless renewed; a release moves it
	// to the end of the drain.
	Expires time.Time
	// Written is when the leader last wrote this entry (grant, renewal,
	// release); force-grants respect a quiet period after it.
	Written time.Time
	// Epoch counts grants of this repo. Every grant bumps it, above the
	// map's epoch floor when the entry was pruned (Map.Prune), so it is
	// monotonic per repo: one epoch, one owner.
	Epoch uint64
	// Session, when non-zero, binds the entry to that session of Node:
	// it lives as long as the session (see Bind), and Expires is derived
	// from the session record, never stored. Zero is a per-repository
	// lease with its own Expires, renewed one by one.
	Session uint64
	// Until caps a bound entry's life: the end of the drain after a
	// release. Zero: no cap.
	Until time.Time
}

// Live reports whether the lease is held at now (Expires is exclusive).
// A bound entry must have been through Bind.
func (e Entry) Live(now time.Time) bool { return now.Before(e.Expires) }

// Key returns the refdb key of repo's entry: the repository as spelled
// (the map holds canonical spellings, as every request is routed after
// its name was resolved to one).
func Key(repo names.Repo) string { return KeyPrefix + repo.String() }

// RepoOfKey is the inverse of Key. A key read from the map is checked like
// any name from outside, so the map never yields a repository the front
// ends could not serve.
func RepoOfKey(key string) (names.Repo, error) {
	s, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return names.Repo{}, fmt.Errorf("key %q lacks prefix %q: %w", key, KeyPrefix, ErrInvalidName)
	}
	repo, err := names.ParseExact(s)
	if err != nil {
		return names.Repo{}, fmt.Errorf("key %q: %w: %w", key, ErrInvalidName, err)
	}
	return repo, nil
}

// MarshalBinary encodes the entry: version byte, epoch (uvarint), expires
// and written (Unix nanoseconds, varint), node length (uvarint) and node.
// A bound entry (version 2) has its session (uvarint) after the epoch and
// stores Until (0: none) in place of Expires, which its session decides.
// Times must lie within what Unix nanoseconds represent (years 1678–2261).
func (e Entry) MarshalBinary() ([]byte, error) {
	if err := validNode(e.Node); err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	if e.Epoch == 0 {
		return nil, fmt.Errorf("encode entry for %s: epoch 0 is never granted: %w", e.Node, ErrCorruptEntry)
	}
	version, expires := byte(entryVersion), e.Expires
	if e.Session != 0 {
		version, expires = boundVersion, e.Until
	}
	var exp int64
	if e.Session == 0 || !expires.IsZero() {
		var err error
		if exp, err = unixNano(expires); err != nil {
			return nil, fmt.Errorf("encode entry for %s: expires: %w", e.Node, err)
		}
	}
	wr, err := unixNano(e.Written)
	if err != nil {
		return nil, fmt.Errorf("encode entry for %s: written: %w", e.Node, err)
	}
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(e.Node))
	b = append(b, version)
	b = binary.AppendUvarint(b, e.Epoch)
	if e.Session != 0 {
		b = binary.AppendUvarint(b, e.Session)
	}
	b = binary.AppendVarint(b, exp)
	b = binary.AppendVarint(b, wr)
	b = binary.AppendUvarint(b, uint64(len(e.Node)))
	b = append(b, e.Node...)
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote. It is strict: unknown
// version, truncation, trailing bytes, epoch 0 or a bad node name are all
// ErrCorruptEntry. Times come back in UTC. A bound entry comes back with
// a zero Expires: Bind it to its session.
func (e *Entry) UnmarshalBinary(b []byte) error {
	corrupt := func(what string) error { return fmt.Errorf("decode entry: %s: %w", what, ErrCorruptEntry) }
	if len(b) == 0 {
		return corrupt("empty")
	}
	version := b[0]
	if err := format.OwnershipEntry.Check(uint32(version)); err != nil {
		return fmt.Errorf("decode entry: %w", err)
	}
	b = b[1:]
	epoch, n := binary.Uvarint(b)
	if n <= 0 || epoch == 0 {
		return corrupt("bad epoch")
	}
	b = b[n:]
	var session uint64
	if version == boundVersion {
		if session, n = binary.Uvarint(b); n <= 0 || session == 0 {
			return corrupt("bad session")
		}
		b = b[n:]
	}
	exp, n := binary.Varint(b)
	if n <= 0 {
		return corrupt("bad expires")
	}
	b = b[n:]
	wr, n := binary.Varint(b)
	if n <= 0 {
		return corrupt("bad written")
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l != uint64(len(b)-n) {
		return corrupt("bad node length or trailing bytes")
	}
	node := string(b[n:])
	if err := validNode(node); err != nil {
		return fmt.Errorf("decode entry: %w: %w", ErrCorruptEntry, err)
	}
	*e = Entry{Node: node, Written: time.Unix(0, wr).UTC(), Epoch: epoch, Session: session}
	switch {
	case session == 0:
		e.Expires = time.Unix(0, exp).UTC()
	case exp != 0:
		e.Until = time.Unix(0, exp).UTC()
	}
	return nil
}

var (
	minNano = time.Unix(0, -1<<63)
	maxNano = time.Unix(0, 1<<63-1)
)

func unixNano(t time.Time) (int64, error) {
	if t.Before(minNano) || t.After(maxNano) {
		return 0, fmt.Errorf("time %s out of range: %w", t, ErrCorruptEntry)
	}
	return t.UnixNano(), nil
}
