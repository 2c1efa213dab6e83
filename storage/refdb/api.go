// Package refdb is rgit's small fenced key-value database kept entirely in
// the object store: one per repository (refs, HEAD, pack list, settings)
// and one for the cluster's ownership map.
//
// Contract (DESIGN.md §4): multi-key compare-and-set transactions, reads
// from memory, a commit returns only once durable, group commit, writer
// fencing (ErrFenced), read-only followers that poll, bounded open cost and
// bounded growth. It imports storage/objstore and the standard library
// (plus zap for logging) only.
//
// Layout: log records P/wal/{seq} and full-state snapshots P/snap/{seq},
// all created with PutIfAbsent (record.go). A writer (db.go) fences by
// appending an empty record after the last one it loaded; group commit,
// CAS evaluation and the settling of ambiguous writes happen on its single
// writer goroutine. Loading (load.go) is one LIST plus parallel GETs;
// followers (follower.go) poll the log tail. The state is a persistent
// treap (view.go), so every View is an immutable snapshot.
package refdb

import (
	"errors"
	"time"

	"go.uber.org/zap"
)

// Sentinel errors callers branch on.
var (
	// ErrFenced: a newer writer has opened this database. The handle must
	// be dropped; nothing it commits from now on is acknowledged.
	ErrFenced = errors.New("refdb: writer fenced by a newer writer")
	// ErrConflict: a compare-and-set condition did not hold. Nothing in the
	// transaction was applied. The returned error is a *ConflictError.
	ErrConflict = errors.New("refdb: compare-and-set conflict")
	// ErrClosed: the handle was closed.
	ErrClosed = errors.New("refdb: closed")
	// ErrCorrupt: an object under the database prefix could not be decoded.
	// The error text names the object.
	ErrCorrupt = errors.New("refdb: corrupt object")
	// ErrNotExist: OpenFollower or OpenExisting found no database.
	ErrNotExist = errors.New("refdb: database does not exist")
	// ErrUncertain: the write carrying the transaction failed in a way
	// that leaves its outcome unknown (it may have landed). The writer
	// settles the outcome before writing anything else; the transaction
	// was not acknowledged and may or may not be visible later, always
	// whole or not at all.
	ErrUncertain = errors.New("refdb: commit outcome unknown")
	// ErrInvalidTxn: the transaction is malformed (empty key, unknown
	// condition). Nothing was written.
	ErrInvalidTxn = errors.New("refdb: invalid transaction")
)

// ConflictError names the key whose condition failed.
type ConflictError struct {
	Key string
}

func (e *ConflictError) Error() string { return "refdb: compare-and-set conflict on " + e.Key }

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Cond is the precondition of one operation.
type Cond uint8

const (
	// Always: no precondition.
	Always Cond = iota
	// IfAbsent: the key must not exist.
	IfAbsent
	// IfEquals: the key must exist with exactly Op.Expect as its value.
	IfEquals
)

// Op is one key operation inside a transaction. With Delete false it sets
// Key to Value; with Delete true it removes Key. CheckOnly ops assert their
// condition and change nothing.
type Op struct {
	Key       string
	Cond      Cond
	Expect    []byte
	Value     []byte
	Delete    bool
	CheckOnly bool
}

// Txn is applied all or nothing, in order: a later op sees the effect of an
// earlier op on the same key.
type Txn []Op

// Set returns an unconditional put.
func Set(key string, value []byte) Op { return Op{Key: key, Value: value} }

// Create returns a put that requires key to be absent.
func Create(key string, value []byte) Op { return Op{Key: key, Cond: IfAbsent, Value: value} }

// Swap returns a put that requires key to hold old.
func Swap(key string, old, value []byte) Op {
	return Op{Key: key, Cond: IfEquals, Expect: old, Value: value}
}

// Remove returns an unconditional delete.
func Remove(key string) Op { return Op{Key: key, Delete: true} }

// RemoveIf returns a delete that requires key to hold old.
func RemoveIf(key string, old []byte) Op {
	return Op{Key: key, Cond: IfEquals, Expect: old, Delete: true}
}

// Check returns an assertion that key holds expect (or, with expect nil and
// absent true, that key is absent).
func Check(key string, expect []byte, absent bool) Op {
	if absent {
		return Op{Key: key, Cond: IfAbsent, CheckOnly: true}
	}
	return Op{Key: key, Cond: IfEquals, Expect: expect, CheckOnly: true}
}

// Options tune a database handle. The zero value is valid.
type Options struct {
	// FlushInterval is a minimum batching delay before a write
	// (RGIT_FLUSH_INTERVAL_MS). Zero: an idle database writes at once.
	FlushInterval time.Duration
	// SnapshotEvery is how many log records may accumulate before the
	// writer snapshots and trims the log. Zero means a default (256).
	SnapshotEvery int
	// PollInterval is how often a follower looks for new records.
	// Zero means 200ms.
	PollInterval time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// WriteTimeout bounds each log write; zero leaves it to the store's
	// own per-request timeout. A timed-out write is ErrUncertain.
	WriteTimeout time.Duration
	// ObserveCommit, if set, is told how long each Commit took and how it
	// ended (the refdb commit-latency metric).
	ObserveCommit func(d time.Duration, err error)
	// Logger receives background failures (snapshot, trim, follower
	// polling); nil discards them.
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = 256
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}
