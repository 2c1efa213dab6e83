package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
)

// Deps are the shared services a repository works with.
type Deps struct {
	Store   objstore.Store
	Cache   *packcache.Cache
	RefOpts refdb.Options
	Log     *zap.Logger
	// Meta is the node's name-index cache; changes made here forget their
	// entries in it. nil: nothing to keep fresh.
	Meta *MetaCache
	// Ahead holds the database listings front ends start beside their
	// name-index reads, which Open uses; nil: Open lists for itself.
	Ahead *ListAhead
	// FreshDeltaBudget bounds the delta search of one full roll-up, so a
	// huge repository falls back to reusing stored deltas instead of
	// holding a maintenance slot for hours; zero: 10 minutes.
	FreshDeltaBudget time.Duration
}

func (d Deps) log() *zap.Logger {
	if d.Log == nil {
		return zap.NewNop()
	}
	return d.Log
}

func (d Deps) freshDeltaBudget() time.Duration {
	if d.FreshDeltaBudget <= 0 {
		return 10 * time.Minute
	}
	return d.FreshDeltaBudget
}

func (d Deps) now() time.Time {
	if d.RefOpts.Now != nil {
		return d.RefOpts.Now()
	}
	return time.Now()
}

// PackInfo describes one pack of a repository (the "pack/{name}" entry).
type PackInfo struct {
	Name    string    `json:"-"`
	Size    int64     `json:"size"`
	IdxSize int64     `json:"idxSize"`
	Objects int       `json:"objects"`
	Created time.Time `json:"created"`
}

func (p PackInfo) encode() []byte {
	b, _ := json.Marshal(p) // cannot fail: plain fields only
	return b
}

func decodePackInfo(name string, b []byte) (PackInfo, error) {
	var p PackInfo
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("pack entry %s: %w", name, err)
	}
	p.Name = name
	return p, nil
}

// Repo is the writer handle of one repository. Methods are safe for
// concurrent use, but writes are meant to come from one owner (the repo
// actor).
type Repo struct {
	d    Deps
	name names.Repo
	db   *refdb.DB
	log  *zap.Logger

	mu     sync.Mutex
	closed bool
	state  *state     // parsed view, reused while the database seq is unchanged
	set    *sharedSet // current pack set; the Repo holds one reference

	// writerID names this writer's pending-delivery marker, written once
	// (marked) with the first commit that queues webhook deliveries
	// (hooks.go). Used by the writer (the repo actor) only.
	writerID string
	marked   bool
}

// Create creates an empty repository: HEAD → refs/heads/main, private.
// ErrExists if it exists in any letter case.
func Create(ctx context.Context, d Deps, r names.Repo) error {
	ok, err := refdb.Exists(ctx, d.Store, dbPrefix(r))
	if err != nil {
		return fmt.Errorf("create %s: %w", r, err)
	}
	if ok {
		return fmt.Errorf("create %s: %w", r, ErrExists)
	}
	// The index entry first: it refuses case variants atomically; a crash
	// before the database leaves an entry that a retry reuses.
	if err := claimName(ctx, d, r); err != nil {
		return fmt.Errorf("create %s: %w", r, err)
	}
	txn := refdb.Txn{
		refdb.Create(keyCreated, []byte(d.now().UTC().Format(time.RFC3339))),
		refdb.Create(keyHead, []byte(defaultHead)),
		refdb.Create(keyVisibility, []byte(visPrivate)),
	}
	return createDB(ctx, d, r, txn)
}

// createDB opens (creating) the database and commits txn, whose first op
// must be Create(keyCreated): losing that race means someone else created
// the repository.
func createDB(ctx context.Context, d Deps, r names.Repo, txn refdb.Txn) error {
	db, err := refdb.Open(ctx, d.Store, dbPrefix(r), d.RefOpts)
	if err != nil {
		return fmt.Errorf("create %s: open database: %w", r, err)
	}
	_, err = db.Commit(ctx, txn)
	cerr := db.Close(ctx)
	var ce *refdb.ConflictError
	if errors.As(err, &ce) {
		return fmt.Errorf("create %s: %w", r, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", r, err)
	}
	if cerr != nil {
		return fmt.Errorf("create %s: close database: %w", r, cerr)
	}
	return nil
}

// Exists reports whether the repository's database exists.
func Exists(ctx context.Context, d Deps, r names.Repo) (bool, error) {
	ok, err := refdb.Exists(ctx, d.Store, dbPrefix(r))
	if err != nil {
		return false, fmt.Errorf("exists %s: %w", r, err)
	}
	return ok, nil
}

// Open opens the repository as its writer, fencing any earlier writer.
// ErrNotFound if it does not exist; it never creates anything. The caller
// must Close it. A listing d.Ahead took for it stands in for the open's
// own, saving a round trip.
func Open(ctx context.Context, d Deps, rn names.Repo) (*Repo, error) {
	pre := d.Ahead.opening(ctx, rn)
	db, err := refdb.OpenExistingListed(ctx, d.Store, dbPrefix(rn), d.RefOpts, pre)
	if err != nil {
		d.Ahead.closed(rn)
	}
	if errors.Is(err, refdb.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", rn, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rn, err)
	}
	return &Repo{d: d, name: rn, db: db, writerID: newWriterID(),
		log: d.log().With(zap.Stringer("repo", rn))}, nil
}

// Name identifies the repository.
func (r *Repo) Name() names.Repo { return r.name }

// Close releases the pack set and closes the database handle. Snapshots
// taken earlier stay usable until they are closed.
func (r *Repo) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	set := r.set
	r.set, r.state, r.closed = nil, nil, true
	r.mu.Unlock()
	r.d.Ahead.closed(r.name)
	if set != nil {
		set.release()
	}
	r.closeMarker(ctx)
	if err := r.db.Close(ctx); err != nil {
		return fmt.Errorf("close %s: %w", r.name, err)
	}
	return nil
}

// Info returns the current settings.
func (r *Repo) Info() auth.RepoInfo {
	info := auth.RepoInfo{Repo: r.name, Head: defaultHead}
	if v, ok := r.db.Get(keyHead); ok {
		info.Head = string(v)
	}
	if v, ok := r.db.Get(keyVisibility); ok {
		info.Public = string(v) == visPublic
	}
	if v, ok := r.db.Get(keyCreated); ok {
		info.Created, _ = time.Parse(time.RFC3339, string(v))
	}
	info.Grants, _ = r.grants()
	info.Protections, _ = r.Protections()
	return info
}

// SetHead points HEAD at target (a full ref name; it need not exist yet).
func (r *Repo) SetHead(ctx context.Context, target string) error {
	if err := validateRefName(target); err != nil {
		return fmt.Errorf("set head of %s: %w", r.name, err)
	}
	return r.commit(ctx, "set head", refdb.Txn{refdb.Set(keyHead, []byte(target))})
}

// SetVisibility makes the repository public or private, in its database
// and in the name index. Access needs both to say public, so the order
// never exposes a private repository: going private writes the index
// first, going public writes it last; a failure in between leaves the
// repository private and a retry finishes. The visibility event (for
// webhooks) is committed with the database's change.
func (r *Repo) SetVisibility(ctx context.Context, public bool) error {
	v := visPrivate
	if public {
		v = visPublic
	}
	meta, err := r.meta()
	if err != nil {
		return fmt.Errorf("set visibility of %s: %w", r.name, err)
	}
	meta.Public = public
	if !public {
		if err := writeMeta(ctx, r.d, meta); err != nil {
			return fmt.Errorf("set visibility of %s: %w", r.name, err)
		}
	}
	e := r.event(ctx, outbox.KindVisibility)
	e.Visibility = v
	if err := r.commitEvents(ctx, "set visibility", refdb.Txn{refdb.Set(keyVisibility, []byte(v))}, e); err != nil {
		return err
	}
	if public {
		if err := writeMeta(ctx, r.d, meta); err != nil {
			return fmt.Errorf("set visibility of %s: %w", r.name, err)
		}
	}
	return nil
}

func (r *Repo) commit(ctx context.Context, what string, txn refdb.Txn) error {
	if _, err := r.db.Commit(ctx, txn); err != nil {
		return fmt.Errorf("%s of %s: %w", what, r.name, err)
	}
	return nil
}

// ReadPacks returns owner/name's recorded packs, read-only from the
// store: it neither fences nor waits for the repository's writer, so an
// operator or a benchmark can look at a repository a node is serving.
// The answer is as of the last durable write.
func ReadPacks(ctx context.Context, d Deps, r names.Repo) ([]PackInfo, error) {
	f, err := refdb.OpenFollower(ctx, d.Store, dbPrefix(r), d.RefOpts)
	if errors.Is(err, refdb.ErrNotExist) {
		return nil, fmt.Errorf("read packs of %s: %w", r, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read packs of %s: %w", r, err)
	}
	defer f.Close()
	st, err := parseState(f.View())
	if err != nil {
		return nil, fmt.Errorf("read packs of %s: %w", r, err)
	}
	return st.packs, nil
}
