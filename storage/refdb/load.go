package refdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/rgit/rgit/storage/objstore"
)

const (
	// maxLoadAttempts bounds re-listing when a concurrent snapshot and
	// trim keep changing the log under a listing.
	maxLoadAttempts = 8
	// fetchParallel bounds concurrent GETs while loading. The writer keeps
	// the tail under two snapshot intervals (512 records by default), so
	// an open fetches the whole tail in one wave: one round trip.
	fetchParallel = 1024
)

// errRetry: the listing went stale (a trim or snapshot raced it); list
// again.
var errRetry = errors.New("refdb: log changed during load")

// dbStore is the database's view of the object store: keys under prefix.
type dbStore struct {
	store  objstore.Store
	prefix string // "" or ends with "/"
}

func newDBStore(store objstore.Store, prefix string) dbStore {
	p := strings.Trim(prefix, "/")
	if p != "" {
		p += "/"
	}
	return dbStore{store: store, prefix: p}
}

func (s dbStore) walKey(seq uint64) string  { return seqKey(s.prefix, walDir, seq) }
func (s dbStore) snapKey(seq uint64) string { return seqKey(s.prefix, snapDir, seq) }

// read returns the whole object.
func (s dbStore) read(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("refdb: get %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("refdb: read %s: %w", key, err)
	}
	return b, nil
}

func (s dbStore) readLog(ctx context.Context, seq uint64) (*logRecord, []byte, error) {
	key := s.walKey(seq)
	b, err := s.read(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	r, err := decodeLog(b)
	if err != nil {
		return nil, nil, corrupt(key, err)
	}
	if r.seq != seq {
		return nil, nil, corrupt(key, fmt.Errorf("%w: record claims sequence %d", errMalformed, r.seq))
	}
	return r, b, nil
}

func (s dbStore) readSnapshot(ctx context.Context, seq uint64) (*View, error) {
	key := s.snapKey(seq)
	b, err := s.read(ctx, key)
	if err != nil {
		return nil, err
	}
	v, err := decodeSnapshot(b)
	if err != nil {
		return nil, corrupt(key, err)
	}
	if v.seq != seq {
		return nil, corrupt(key, fmt.Errorf("%w: snapshot claims sequence %d", errMalformed, v.seq))
	}
	return v, nil
}

// put creates key with data; an existing key yields an error wrapping
// objstore.ErrExists.
func (s dbStore) put(ctx context.Context, key string, data []byte) error {
	if err := s.store.PutIfAbsent(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("refdb: create %s: %w", key, err)
	}
	return nil
}

// holds reports whether key stores exactly data (an earlier attempt of
// ours landed) rather than another writer's record.
func (s dbStore) holds(ctx context.Context, key string, data []byte) (bool, error) {
	got, err := s.read(ctx, key)
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, data), nil
}

// listing is what one LIST of the database found.
type listing struct {
	any     bool     // at least one database object
	hasSnap bool     // snaps non-empty
	snap    uint64   // newest snapshot
	wals    []uint64 // ascending
}

func (s dbStore) list(ctx context.Context) (listing, error) {
	var l listing
	for info, err := range s.store.List(ctx, s.prefix, "") {
		if err != nil {
			return listing{}, fmt.Errorf("refdb: list %s: %w", s.prefix, err)
		}
		if seq, ok := parseSeqKey(s.prefix, walDir, info.Key); ok {
			l.wals = append(l.wals, seq)
			l.any = true
		} else if seq, ok := parseSeqKey(s.prefix, snapDir, info.Key); ok {
			l.snap, l.hasSnap, l.any = seq, true, true
		}
	}
	return l, nil
}

// listWAL returns the log sequence numbers above after, ascending.
func (s dbStore) listWAL(ctx context.Context, after uint64) ([]uint64, error) {
	var out []uint64
	for info, err := range s.store.List(ctx, s.prefix+walDir, s.walKey(after)) {
		if err != nil {
			return nil, fmt.Errorf("refdb: list %s%s: %w", s.prefix, walDir, err)
		}
		if seq, ok := parseSeqKey(s.prefix, walDir, info.Key); ok && seq > after {
			out = append(out, seq)
		}
	}
	return out, nil
}

// loaded is the state load found.
type loaded struct {
	view    *View
	snapSeq uint64 // sequence of the snapshot it started from (0: none)
	exists  bool   // false: no database under the prefix
}

// newest is the sequence number of the newest state the listing names
// (0: none): the last log record, or the snapshot if it is newer.
func (l listing) newest() uint64 {
	n := l.snap
	if len(l.wals) > 0 {
		n = max(n, l.wals[len(l.wals)-1])
	}
	return n
}

// load reads the current state: one LIST, then the newest snapshot and
// every later log record in parallel (two sequential round trips).
func (s dbStore) load(ctx context.Context) (loaded, error) {
	var last error
	for range maxLoadAttempts {
		l, err := s.list(ctx)
		if err != nil {
			return loaded{}, err
		}
		ld, err := s.loadFrom(ctx, l)
		if errors.Is(err, errRetry) {
			last = err
			continue
		}
		return ld, err
	}
	return loaded{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.prefix, last)
}

// loadFrom reads the state a listing names; errRetry: list again.
func (s dbStore) loadFrom(ctx context.Context, l listing) (loaded, error) {
	if !l.any {
		return loaded{view: emptyView}, nil
	}
	v, err := s.loadListed(ctx, l)
	if err != nil {
		return loaded{}, err
	}
	return loaded{view: v, snapSeq: l.snap, exists: true}, nil
}

func (s dbStore) loadListed(ctx context.Context, l listing) (*View, error) {
	base := uint64(0)
	if l.hasSnap {
		base = l.snap
	}
	var tail []uint64
	for _, seq := range l.wals {
		if seq > base {
			tail = append(tail, seq)
		}
	}
	if len(tail) > 0 && tail[0] != base+1 {
		return nil, fmt.Errorf("%w: log resumes at %d after state %d", errRetry, tail[0], base)
	}
	for i := 1; i < len(tail); i++ {
		if tail[i] != tail[i-1]+1 {
			return nil, fmt.Errorf("%w: log gap between %d and %d", errRetry, tail[i-1], tail[i])
		}
	}
	var snap *View
	recs := make([]*logRecord, len(tail))
	err := parallel(ctx, len(tail)+1, func(ctx context.Context, i int) error {
		if i == len(tail) {
			if !l.hasSnap {
				snap = emptyView
				return nil
			}
			v, err := s.readSnapshot(ctx, base)
			snap = v
			return err
		}
		r, _, err := s.readLog(ctx, tail[i])
		recs[i] = r
		return err
	})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", errRetry, err)
	}
	if err != nil {
		return nil, err
	}
	v := snap
	for i, r := range recs {
		v = v.apply(tail[i], r.muts)
	}
	return v, nil
}

// readLogs fetches log records first..last in parallel.
func (s dbStore) readLogs(ctx context.Context, first, last uint64) ([]*logRecord, error) {
	if last < first {
		return nil, nil
	}
	recs := make([]*logRecord, last-first+1)
	err := parallel(ctx, len(recs), func(ctx context.Context, i int) error {
		r, _, err := s.readLog(ctx, first+uint64(i))
		recs[i] = r
		return err
	})
	return recs, err
}

// parallel runs fn(0..n-1) with at most fetchParallel in flight and
// returns the first error; the first failure cancels the rest.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, fetchParallel)
	)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		// Cancelled from outside before all work started.
		return context.Cause(ctx)
	}
	return first
}

// Exists reports whether a database lives under prefix.
func Exists(ctx context.Context, store objstore.Store, prefix string) (bool, error) {
	s := newDBStore(store, prefix)
	for info, err := range store.List(ctx, s.prefix, "") {
		if err != nil {
			return false, fmt.Errorf("refdb: list %s: %w", s.prefix, err)
		}
		if _, ok := parseSeqKey(s.prefix, walDir, info.Key); ok {
			return true, nil
		}
		if _, ok := parseSeqKey(s.prefix, snapDir, info.Key); ok {
			return true, nil
		}
	}
	return false, nil
}

// Destroy deletes every object of the database under prefix. Any writer
// still open on it must be closed first: it would recreate the log.
func Destroy(ctx context.Context, store objstore.Store, prefix string) error {
	s := newDBStore(store, prefix)
	var keys []string
	for _, dir := range []string{walDir, snapDir} {
		for info, err := range store.List(ctx, s.prefix+dir, "") {
			if err != nil {
				return fmt.Errorf("refdb: destroy %s: list: %w", s.prefix, err)
			}
			keys = append(keys, info.Key)
		}
	}
	return deleteKeys(ctx, store, keys)
}

func deleteKeys(ctx context.Context, store objstore.Store, keys []string) error {
	return parallel(ctx, len(keys), func(ctx context.Context, i int) error {
		if err := store.Delete(ctx, keys[i]); err != nil {
			return fmt.Errorf("refdb: delete %s: %w", keys[i], err)
		}
		return nil
	})
}
