package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/ttlcache"
)

// The name index. Each repository has one small object keyed by its
// case-folded name, holding its canonical spelling and its visibility:
//
//	index/repo/{fold(owner)}/{fold(name)} → {"owner":…, "name":…, "public":…}
//
// It does three jobs. Access is decided from it before any database is
// opened, so "private" and "missing" cost the same single GET (DESIGN §6).
// Any spelling of a name reaches the repository under its canonical
// spelling. And it is written with create-if-absent at create and fork, so
// two names differing only in case can never both be created, atomically
// across nodes.
//
// The database's meta/visibility stays the writer's copy: a session
// re-checks access against it (gitserve). SetVisibility writes both in the
// order that never exposes a private repository: going private, index
// first; going public, index last.

// A repository's entry in the name index is the access part of its
// settings (auth.RepoInfo: canonical name, visibility, collaborators),
// stored as a metaRecord.
type metaRecord struct {
	Owner  string `json:"owner"`
	Name   string `json:"name"`
	Public bool   `json:"public"`
	// Grants are the collaborators (see access.go).
	Grants []auth.Grant `json:"grants,omitempty"`
}

func recordOf(info auth.RepoInfo) metaRecord {
	return metaRecord{Owner: info.Repo.Owner(), Name: info.Repo.Name(), Public: info.Public, Grants: info.Grants}
}

const (
	metaPrefix = "index/repo/"
	// migratedKey marks a completed MigrateIndex: every repository created
	// before the index has its entry, and every later create writes its
	// own, so later starts skip the scan.
	migratedKey = "index/migrated-v1"
	// maxMeta bounds what a lookup reads (maxGrants grants fit).
	maxMeta = 256 << 10
)

// MetaKey is the index key of r (any spelling).
func MetaKey(r names.Repo) string { return metaPrefix + r.Key() }

// ListMeta returns the index entry of every repository, in key order,
// stopping after max entries (truncated then says more exist). It costs a
// listing plus one GET per entry: fine for a browse page's list, not for
// a hot path.
func ListMeta(ctx context.Context, s objstore.Store, max int) (metas []auth.RepoInfo, truncated bool, err error) {
	for info, err := range s.List(ctx, metaPrefix, "") {
		if err != nil {
			return nil, false, fmt.Errorf("list the name index: %w", err)
		}
		r, err := names.Parse(strings.TrimPrefix(info.Key, metaPrefix))
		if err != nil {
			continue // not an entry this version writes
		}
		if len(metas) == max {
			return metas, true, nil
		}
		m, err := ReadMeta(ctx, s, r)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, false, err
		}
		metas = append(metas, m)
	}
	return metas, false, nil
}

func (m metaRecord) encode() []byte {
	b, _ := json.Marshal(m) // cannot fail: plain fields only
	return b
}

// ReadMeta reads the index entry of r in any spelling (one GET): the
// repository's access settings under its canonical spelling. ErrNotFound
// if there is none.
func ReadMeta(ctx context.Context, s objstore.Store, r names.Repo) (auth.RepoInfo, error) {
	key := MetaKey(r)
	rc, _, err := s.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return auth.RepoInfo{}, fmt.Errorf("%s: %w", r, ErrNotFound)
	}
	if err != nil {
		return auth.RepoInfo{}, fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxMeta+1))
	if err != nil {
		return auth.RepoInfo{}, fmt.Errorf("read %s: %w", key, err)
	}
	var m metaRecord
	if err := json.Unmarshal(data, &m); err != nil || len(data) > maxMeta {
		return auth.RepoInfo{}, fmt.Errorf("decode %s: corrupt index entry (%d bytes): %v", key, len(data), err)
	}
	// The stored spelling is checked like any name read from outside.
	canon, err := names.New(m.Owner, m.Name)
	if err != nil || !canon.Same(r) {
		return auth.RepoInfo{}, fmt.Errorf("decode %s: entry names %s/%s", key, m.Owner, m.Name)
	}
	return auth.RepoInfo{Repo: canon, Public: m.Public, Grants: m.Grants}, nil
}

// claimName creates the index entry of a new repository, private. It
// fails with ErrExists if the name is taken in any letter case, except by
// an entry with this exact spelling whose database does not exist: that is
// a create that crashed before its database (or one running right now on
// another node; the database's own create-if-absent decides that race).
func claimName(ctx context.Context, d Deps, r names.Repo) error {
	rec := recordOf(auth.RepoInfo{Repo: r}).encode()
	err := d.Store.PutIfAbsent(ctx, MetaKey(r), bytes.NewReader(rec), int64(len(rec)))
	defer d.Meta.Forget(r)
	if !errors.Is(err, objstore.ErrExists) {
		return err
	}
	old, err := ReadMeta(ctx, d.Store, r)
	if err != nil {
		return err
	}
	if old.Repo != r {
		return fmt.Errorf("%s: %w as %s (names are case-insensitive)", r, ErrExists, old.Repo)
	}
	ok, err := refdb.Exists(ctx, d.Store, dbPrefix(r))
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%s: %w", r, ErrExists)
	}
	return nil
}

// writeMeta replaces the index entry of info.Repo, unless it belongs to
// another spelling (a legacy case collision: see MigrateIndex), which it
// leaves alone.
func writeMeta(ctx context.Context, d Deps, info auth.RepoInfo) error {
	defer d.Meta.Forget(info.Repo)
	old, err := ReadMeta(ctx, d.Store, info.Repo)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case old.Repo != info.Repo:
		d.log().Warn("index entry belongs to another spelling; left alone",
			zap.Stringer("repo", info.Repo), zap.Stringer("index", old.Repo))
		return nil
	}
	rec := recordOf(info).encode()
	if err := d.Store.Put(ctx, MetaKey(info.Repo), bytes.NewReader(rec), int64(len(rec))); err != nil {
		return fmt.Errorf("write index entry of %s: %w", info.Repo, err)
	}
	return nil
}

// deleteMeta removes r's index entry if it has this exact spelling, and
// reports whether it did.
func deleteMeta(ctx context.Context, d Deps, r names.Repo) (bool, error) {
	defer d.Meta.Forget(r)
	old, err := ReadMeta(ctx, d.Store, r)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if old.Repo != r {
		return false, nil
	}
	if err := d.Store.Delete(ctx, MetaKey(r)); err != nil {
		return false, fmt.Errorf("delete index entry of %s: %w", r, err)
	}
	return true, nil
}

// Canonical resolves a name as an operator typed it: the exact spelling
// if a database exists under it (so a legacy case collision stays
// addressable for delete), else the spelling the index holds.
func Canonical(ctx context.Context, d Deps, r names.Repo) (names.Repo, error) {
	ok, err := Exists(ctx, d, r)
	if err != nil || ok {
		return r, err
	}
	m, err := ReadMeta(ctx, d.Store, r)
	if err != nil {
		return names.Repo{}, err
	}
	return m.Repo, nil
}

// MigrateIndex writes the index entry of every repository that has none
// (repositories created before the index existed), reading its visibility
// from its database without fencing it. Two legacy repositories whose
// names differ only in case cannot both be indexed: the first in sorted
// order keeps the name, the other is logged and returned in collisions; it
// stays in the store (delete-repo with its exact spelling removes it).
// Every owner is recorded in owners (nil: skipped) so that credentials
// added later in another spelling join the same identity. Idempotent;
// safe to run on several nodes at once. Once a run completes it leaves a
// marker and later runs return at once (one HEAD): the scan costs a
// store read per repository, too much for every start of a large fleet.
// Nodes that predate the index stop creating repositories before the
// marker can appear: a single node has no others, and a rollout restarts
// the leader (which runs this) last.
func MigrateIndex(ctx context.Context, d Deps, owners OwnerIndex) (written int, collisions []string, err error) {
	if _, err := d.Store.Head(ctx, migratedKey); err == nil {
		return 0, nil, nil
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return 0, nil, fmt.Errorf("name index: %w", err)
	}
	all, err := List(ctx, d)
	if err != nil {
		return 0, nil, err
	}
	claimed := map[string]bool{}
	for _, full := range all {
		r, err := names.Parse(full)
		if err != nil {
			d.log().Warn("name index: repository with an invalid name skipped", zap.String("repo", full), zap.Error(err))
			continue
		}
		if owner := r.Owner(); owners != nil && !claimed[owner] {
			claimed[owner] = true
			canon, err := owners.ClaimOwner(ctx, owner)
			if err != nil {
				return written, collisions, fmt.Errorf("index owner of %s: %w", full, err)
			}
			if canon != owner {
				d.log().Warn("name index: legacy owner spelled differently; the first spelling is canonical",
					zap.String("repo", full), zap.String("owner", canon))
			}
		}
		m, err := ReadMeta(ctx, d.Store, r)
		if err == nil {
			if m.Repo != r {
				collisions = append(collisions, full)
				d.log().Warn("name index: legacy repositories differ only in case; this one is unreachable by git",
					zap.String("repo", full), zap.Stringer("canonical", m.Repo))
			}
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			return written, collisions, err
		}
		public, err := readVisibility(ctx, d, r)
		if errors.Is(err, ErrNotFound) {
			continue // objects without a database: garbage, not a repository
		}
		if err != nil {
			return written, collisions, err
		}
		rec := recordOf(auth.RepoInfo{Repo: r, Public: public}).encode()
		err = d.Store.PutIfAbsent(ctx, MetaKey(r), bytes.NewReader(rec), int64(len(rec)))
		if errors.Is(err, objstore.ErrExists) {
			continue // another node, or a create, got there first; the next run checks it
		}
		if err != nil {
			return written, collisions, fmt.Errorf("index %s: %w", full, err)
		}
		d.Meta.Forget(r)
		written++
	}
	stamp := []byte(time.Now().UTC().Format(time.RFC3339) + "\n")
	if err := d.Store.Put(ctx, migratedKey, bytes.NewReader(stamp), int64(len(stamp))); err != nil {
		return written, collisions, fmt.Errorf("name index: mark migrated: %w", err)
	}
	return written, collisions, nil
}

// OwnerIndex records owners' canonical spellings (auth.Store).
type OwnerIndex interface {
	// ClaimOwner returns owner's canonical spelling, recording owner as
	// it if the owner is new.
	ClaimOwner(ctx context.Context, owner string) (string, error)
}

// readVisibility reads a database's visibility read-only.
func readVisibility(ctx context.Context, d Deps, r names.Repo) (bool, error) {
	f, err := refdb.OpenFollower(ctx, d.Store, dbPrefix(r), d.RefOpts)
	if errors.Is(err, refdb.ErrNotExist) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r, err)
	}
	defer f.Close()
	v, _ := f.View().Get(keyVisibility)
	return string(v) == visPublic, nil
}

// MetaCache is a node's cache of index lookups. Entries live a short
// time; writes through this node (create, fork, delete, visibility)
// forget theirs at once, so the TTL only bounds how stale another node's
// change can look here. Missing names are cached exactly as found ones
// (the same TTL), so "missing" and "private" cost the same at any time
// after a first probe: one GET cold, nothing warm.
type MetaCache struct {
	store objstore.Store
	c     *ttlcache.Cache[auth.RepoInfo]
}

// DefaultMetaTTL is how long a node reuses an index lookup, found or
// missing alike: the bound on how long another node's visibility change
// takes to show here.
const DefaultMetaTTL = 5 * time.Second

// MetaCacheOptions tunes a MetaCache; zero values take the defaults.
type MetaCacheOptions struct {
	TTL        time.Duration // default DefaultMetaTTL, for found and missing names alike
	MaxEntries int           // default 8192
	Now        func() time.Time
}

// NewMetaCache returns a cache reading the index from s.
func NewMetaCache(s objstore.Store, o MetaCacheOptions) *MetaCache {
	if o.TTL <= 0 {
		o.TTL = DefaultMetaTTL
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 8192
	}
	// While the store is unavailable no name or visibility can change
	// through it, and warm repositories keep serving.
	return &MetaCache{store: s, c: ttlcache.New[auth.RepoInfo](o.TTL, o.TTL, o.MaxEntries, o.Now).
		ServeStale(objstore.StaleWhileUnavailable, objstore.Unavailable)}
}

// Lookup returns r's index entry (any spelling), or ErrNotFound. Store
// failures are not cached.
func (c *MetaCache) Lookup(ctx context.Context, r names.Repo) (auth.RepoInfo, error) {
	m, found, err := c.c.Load(MetaKey(r), func() (auth.RepoInfo, bool, error) {
		m, err := ReadMeta(ctx, c.store, r)
		if errors.Is(err, ErrNotFound) {
			return auth.RepoInfo{}, false, nil
		}
		return m, err == nil, err
	})
	switch {
	case err != nil:
		return auth.RepoInfo{}, err
	case !found:
		return auth.RepoInfo{}, fmt.Errorf("%s: %w", r, ErrNotFound)
	}
	return m, nil
}

// Public reports whether r (any spelling) is public according to the
// index, as Lookup finds it; a missing repository is not.
func (c *MetaCache) Public(ctx context.Context, r names.Repo) (bool, error) {
	m, err := c.Lookup(ctx, r)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return m.Public, err
}

// Cached reports whether a Lookup of r would be answered from the cache
// (no store call); nil-safe.
func (c *MetaCache) Cached(r names.Repo) bool {
	if c == nil {
		return false
	}
	_, _, hit := c.c.Get(MetaKey(r))
	return hit
}

// Forget drops r's entry (any spelling); nil-safe.
func (c *MetaCache) Forget(r names.Repo) {
	if c == nil {
		return
	}
	c.c.Drop(MetaKey(r))
}
