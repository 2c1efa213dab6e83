package walk

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rgit/rgit/storage/object"
)

// Sentinel errors callers may branch on.
var (
	// ErrNotCommit is returned when a commit was required and the object
	// has another type.
	ErrNotCommit = errors.New("not a commit")
	// ErrMissingObject is wrapped by CheckConnected when a pushed tip
	// reaches an object that is neither already known nor readable.
	ErrMissingObject = errors.New("missing necessary objects")
)

// SizeReader is an optional interface of an object.Reader that can report
// an object's type and size without inflating it. Blob-size filters and the
// connectivity check use it when present.
type SizeReader interface {
	ReadHeader(id object.ID) (object.Type, int64, error)
}

// Commit is the part of a commit the walks need. Values are shared through
// the Graph cache and must not be modified.
type Commit struct {
	Tree    object.ID
	Parents []object.ID
	Time    int64 // committer time, seconds since the epoch
}

// DefaultMaxCommits is the cache bound NewGraph uses when given <= 0.
const DefaultMaxCommits = 1 << 19

// Graph is a per-repository cache of parsed commits in front of an
// object.Reader. It is safe for concurrent use.
//
// The cache is a two-generation approximation of LRU: lookups hit the
// current generation, or promote from the previous one; when the current
// generation fills up it becomes the previous one and the old previous
// generation is dropped. That bounds memory at maxCommits entries without
// per-entry list bookkeeping.
type Graph struct {
	r       object.Reader
	genSize int

	// lastObjects is the size of the last Objects result, used to presize
	// the next walk's sets (most requests to a repository are alike).
	lastObjects atomic.Int64

	mu   sync.Mutex
	cur  map[object.ID]*Commit
	prev map[object.ID]*Commit
}

// NewGraph returns a graph reading from r and caching up to maxCommits
// parsed commits (DefaultMaxCommits if maxCommits <= 0).
func NewGraph(r object.Reader, maxCommits int) *Graph {
	if maxCommits <= 0 {
		maxCommits = DefaultMaxCommits
	}
	gen := max(maxCommits/2, 1)
	return &Graph{r: r, genSize: gen, cur: make(map[object.ID]*Commit)}
}

// Reader returns the underlying object reader.
func (g *Graph) Reader() object.Reader { return g.r }

// Commit returns the parsed commit id. The error wraps object.ErrNotFound
// for a missing object and ErrNotCommit for an object of another type.
func (g *Graph) Commit(id object.ID) (*Commit, error) {
	if c := g.cached(id); c != nil {
		return c, nil
	}
	typ, data, err := g.r.ReadObject(id)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", id, err)
	}
	if typ != object.Commit {
		return nil, fmt.Errorf("object %s is a %s: %w", id, typ, ErrNotCommit)
	}
	return g.add(id, data)
}

// add parses and caches a commit whose bytes the caller already
// read (e.g. while peeling a want of unknown type).
func (g *Graph) add(id object.ID, data []byte) (*Commit, error) {
	info, err := object.ParseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("parse commit %s: %w", id, err)
	}
	c := &Commit{Tree: info.Tree, Parents: info.Parents, Time: info.CommitterTime}
	g.mu.Lock()
	if len(g.cur) >= g.genSize {
		g.prev, g.cur = g.cur, make(map[object.ID]*Commit, g.genSize/4)
	}
	g.cur[id] = c
	g.mu.Unlock()
	return c, nil
}

func (g *Graph) cached(id object.ID) *Commit {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.cur[id]; ok {
		return c
	}
	c, ok := g.prev[id]
	if !ok {
		return nil
	}
	delete(g.prev, id)
	if len(g.cur) >= g.genSize {
		g.prev, g.cur = g.cur, make(map[object.ID]*Commit, g.genSize/4)
	}
	g.cur[id] = c
	return c
}

// peeled is an object after following annotated tags.
type peeled struct {
	id     object.ID
	typ    object.Type
	tags   []object.ID // the tag chain walked, outermost first
	commit *Commit     // set when typ == object.Commit
}

// peel follows annotated tags from id to the first non-tag object. Commits
// are parsed through the cache; other objects are only typed.
func (g *Graph) peel(id object.ID) (peeled, error) {
	p := peeled{id: id}
	if c := g.cached(id); c != nil {
		p.typ, p.commit = object.Commit, c
		return p, nil
	}
	for depth := 0; ; depth++ {
		if depth > maxTagChain {
			return p, fmt.Errorf("peel %s: tag chain longer than %d", id, maxTagChain)
		}
		typ, data, err := g.r.ReadObject(p.id)
		if err != nil {
			return p, fmt.Errorf("peel %s: read %s: %w", id, p.id, err)
		}
		switch typ {
		case object.Tag:
			t, err := object.ParseTag(data)
			if err != nil {
				return p, fmt.Errorf("peel %s: parse tag %s: %w", id, p.id, err)
			}
			p.tags = append(p.tags, p.id)
			p.id = t.Object
			continue
		case object.Commit:
			c, err := g.add(p.id, data)
			if err != nil {
				return p, err
			}
			p.commit = c
		}
		p.typ = typ
		return p, nil
	}
}

// maxTagChain bounds tag-of-tag chains so a crafted cycle-free but absurdly
// long chain cannot stall a walk.
const maxTagChain = 64
