package repo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
)

// Ref is one stored ref.
type Ref struct {
	Name string // full name, e.g. "refs/heads/main"
	ID   object.ID
}

// Snapshot is a consistent read view of a repository: refs, settings and
// pack list as of one database sequence, plus the objects of those packs.
// It is immutable apart from a lazily filled peel cache, safe for
// concurrent use, and must be closed.
type Snapshot struct {
	Repo   names.Repo
	Seq    uint64
	Refs   []Ref // sorted by name
	Head   string
	Public bool
	Packs  []PackInfo // sorted by name

	st        *state
	set       *sharedSet
	closeOnce sync.Once
}

// state is the parsed form of one database view, shared by snapshots of
// the same sequence number.
type state struct {
	seq     uint64
	refs    []Ref
	head    string
	public  bool
	packs   []PackInfo
	packRaw map[string][]byte // exact stored values, for compare-and-set
	setKey  string
	refGen  []byte // keyRefGen's value; nil if no ref was ever updated
	// deleted is the kept value of each ref deleted under a no-force-push
	// rule (access.go); nil when there is none.
	deleted map[string]object.ID

	peelMu sync.Mutex
	peeled map[object.ID]peelResult

	tipsOnce sync.Once
	tips     string // tipsKey
}

type peelResult struct {
	id    object.ID
	isTag bool
}

func parseState(v *refdb.View) (*state, error) {
	if err := checkLayout(v); err != nil {
		return nil, err
	}
	st := &state{seq: v.Seq(), head: defaultHead, packRaw: map[string][]byte{}, peeled: map[object.ID]peelResult{}}
	if h, ok := v.Get(keyHead); ok {
		st.head = string(h)
	}
	if gen, ok := v.Get(keyRefGen); ok {
		st.refGen = gen
	}
	if vis, ok := v.Get(keyVisibility); ok {
		st.public = string(vis) == visPublic
	}
	for k, val := range v.Scan(prefixRef) {
		id, err := object.ParseID(string(val))
		if err != nil {
			return nil, fmt.Errorf("ref %s: %w", k, err)
		}
		st.refs = append(st.refs, Ref{Name: strings.TrimPrefix(k, prefixRef), ID: id})
	}
	sort.Slice(st.refs, func(i, j int) bool { return st.refs[i].Name < st.refs[j].Name })
	for k, val := range v.Scan(prefixDeleted) {
		id, err := object.ParseID(string(val))
		if err != nil {
			return nil, fmt.Errorf("deleted tip %s: %w", k, err)
		}
		if st.deleted == nil {
			st.deleted = map[string]object.ID{}
		}
		st.deleted[strings.TrimPrefix(k, prefixDeleted)] = id
	}
	names := make([]string, 0)
	for k, val := range v.Scan(prefixPack) {
		name := strings.TrimPrefix(k, prefixPack)
		p, err := decodePackInfo(name, val)
		if err != nil {
			return nil, err
		}
		st.packs = append(st.packs, p)
		st.packRaw[name] = val
		names = append(names, name)
	}
	sort.Slice(st.packs, func(i, j int) bool { return st.packs[i].Name < st.packs[j].Name })
	sort.Strings(names)
	st.setKey = strings.Join(names, ",")
	return st, nil
}

// sharedSet is a reference-counted pack set: the packs stay acquired from
// the cache until the Repo and every Snapshot using the set let go.
type sharedSet struct {
	key      string
	set      *pack.Set
	releases []func()
	cache    *packcache.Cache // where the packs (and their bitmaps) come from
	// stack is the bitmap stack fetches last chose over these packs:
	// kept while the choice stays the same, so its lookups' multi-index
	// is built once, not per fetch.
	stack atomic.Pointer[bitmap.Stack]
	// reach is the reachable set of the latest ref tips asked about
	// (Snapshot.Reachable).
	reachMu sync.Mutex
	reach   *reachEntry

	mu   sync.Mutex
	refs int
}

func (s *sharedSet) acquire() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

func (s *sharedSet) release() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		for _, rel := range s.releases {
			rel()
		}
	}
}

// openSet acquires every listed pack from the cache, downloading up to
// openParallel at once. A cold node's first request waits only for the
// packs' indexes: a pack body is read while it arrives
// (packcache.GetArriving), so a clone streams it as it downloads. On error
// nothing stays acquired.
func openSet(ctx context.Context, d Deps, r names.Repo, st *state) (*sharedSet, error) {
	if d.Cache == nil && len(st.packs) > 0 {
		return nil, errors.New("no pack cache configured")
	}
	s := &sharedSet{key: st.setKey, cache: d.Cache}
	packs := make([]*pack.Pack, len(st.packs))
	releases := make([]func(), len(st.packs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(openParallel)
	for i, p := range st.packs {
		g.Go(func() error {
			pk, ik := PackKeys(r, p.Name)
			pk2, rel, err := d.Cache.GetArriving(gctx, pk, ik, p.Name)
			if err != nil {
				return fmt.Errorf("pack %s: %w", p.Name, err)
			}
			packs[i], releases[i] = pk2, rel
			return nil
		})
	}
	err := g.Wait()
	for _, rel := range releases {
		if rel != nil {
			if err != nil {
				rel()
				continue
			}
			s.releases = append(s.releases, rel)
		}
	}
	if err != nil {
		return nil, err
	}
	s.set = pack.NewSet(packs...)
	return s, nil
}

// failed reports whether the set must be opened again: a pack of it
// stopped arriving (its download failed: reads of it fail), or is served
// from memory around a full cache disk, which is for the requests at hand
// only (the next open caches it if the disk has room again).
func (s *sharedSet) failed() bool {
	for _, p := range s.set.Packs() {
		if a := p.Arrival(); a != nil && a.Err() != nil || s.cache.Uncached(p) {
			return true
		}
	}
	return false
}

// openParallel bounds the packs one snapshot downloads at once; each is
// itself read in parallel ranges.
const openParallel = 4

// Snapshot returns a consistent view. It reuses the parsed state and the
// open pack set while nothing changed, so it is cheap to call per request.
func (r *Repo) Snapshot(ctx context.Context) (*Snapshot, error) {
	v := r.db.View()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("snapshot %s: %w", r.name, refdb.ErrClosed)
	}
	st := r.state
	if st == nil || st.seq != v.Seq() {
		var err error
		if st, err = parseState(v); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", r.name, err)
		}
	}
	set := r.set
	if set != nil && set.failed() {
		// Let go of a pack whose download failed now, not once a new set
		// opens: its file, deleted from the cache directory, stays open
		// (and its space used) while anything holds it, and opening again
		// may fail for as long as that space is missing.
		r.set = nil
		set.release()
		set = nil
	}
	if set == nil || set.key != st.setKey {
		var err error
		if set, err = openSet(ctx, r.d, r.name, st); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", r.name, err)
		}
		set.acquire() // the Repo's reference
		if r.set != nil {
			r.set.release()
		}
		r.set = set
	}
	r.state = st
	set.acquire()
	return newSnapshot(r.name, st, set), nil
}

func newSnapshot(r names.Repo, st *state, set *sharedSet) *Snapshot {
	return &Snapshot{
		Repo: r, Seq: st.seq,
		Refs: st.refs, Head: st.head, Public: st.public, Packs: st.packs,
		st: st, set: set,
	}
}

// Objects is the snapshot's object view. Valid until Close.
func (s *Snapshot) Objects() *pack.Set { return s.set.set }

// Ref looks up one ref by full name.
func (s *Snapshot) Ref(name string) (object.ID, bool) {
	i := sort.Search(len(s.Refs), func(i int) bool { return s.Refs[i].Name >= name })
	if i < len(s.Refs) && s.Refs[i].Name == name {
		return s.Refs[i].ID, true
	}
	return object.ID{}, false
}

// DeletedTip is the value ref was deleted at while a no-force-push rule
// covered it: creating ref again must fast-forward from it (RefUpdate.
// Deleted). Zero when none is kept.
func (s *Snapshot) DeletedTip(ref string) object.ID { return s.st.deleted[ref] }

// Close releases the snapshot's packs. Idempotent.
func (s *Snapshot) Close() {
	s.closeOnce.Do(s.set.release)
}

// maxTagChain bounds tag-of-tag chains when peeling.
const maxTagChain = 32

// Peeled returns what id peels to when it is an annotated tag (following
// tag-of-tag chains), with isTag false for any other object. Results are
// cached for snapshots of the same state.
func (s *Snapshot) Peeled(id object.ID) (peeled object.ID, isTag bool, err error) {
	s.st.peelMu.Lock()
	res, ok := s.st.peeled[id]
	s.st.peelMu.Unlock()
	if ok {
		return res.id, res.isTag, nil
	}
	res, err = peel(s.set.set, id)
	if err != nil {
		return object.ID{}, false, fmt.Errorf("peel %s in %s: %w", id, s.Repo, err)
	}
	s.st.peelMu.Lock()
	s.st.peeled[id] = res
	s.st.peelMu.Unlock()
	return res.id, res.isTag, nil
}

func peel(set *pack.Set, id object.ID) (peelResult, error) {
	cur := id
	for depth := 0; ; depth++ {
		// Header only: peeling every ref must not inflate every commit.
		t, _, err := set.ReadHeader(cur)
		if err != nil {
			return peelResult{}, err
		}
		if t != object.Tag {
			return peelResult{id: cur, isTag: depth > 0}, nil
		}
		if depth == maxTagChain {
			return peelResult{}, fmt.Errorf("tag chain longer than %d", maxTagChain)
		}
		_, data, err := set.ReadObject(cur)
		if err != nil {
			return peelResult{}, err
		}
		tag, err := object.ParseTag(data)
		if err != nil {
			return peelResult{}, fmt.Errorf("tag %s: %w", cur, err)
		}
		cur = tag.Object
	}
}

// checkLayout refuses a database whose layout version this build does
// not read, before anything in it is interpreted.
func checkLayout(v *refdb.View) error {
	ver := uint64(1)
	if b, ok := v.Get(keyFormat); ok {
		var err error
		if ver, err = strconv.ParseUint(string(b), 10, 32); err != nil {
			return fmt.Errorf("malformed %s %q", keyFormat, b)
		}
	}
	return format.Repository.Check(uint32(ver))
}
