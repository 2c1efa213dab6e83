package refdb

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
)

const (
	// maxFenceAttempts bounds how far Open chases a busy previous writer
	// before giving up.
	maxFenceAttempts = 64
	// Group-commit batch bounds: one log record carries at most this many
	// transactions or (about) this many bytes.
	maxBatchTxns  = 8192
	maxBatchBytes = 8 << 20
	queueLen      = 4096
)

// DB is the writer handle of a database. Commits are serialized through
// one goroutine that batches concurrent commits into one log record.
type DB struct {
	s      dbStore
	opts   Options
	writer [writerIDLen]byte

	cur atomic.Pointer[View]

	reqs      chan *request
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{} // closed when the writer goroutine exits

	runCtx    context.Context // store calls; cancelled only if Close gives up
	cancelRun context.CancelFunc
	bg        sync.WaitGroup
	snapping  atomic.Bool
	snapSeq   atomic.Uint64 // newest snapshot known written
	snapDone  chan struct{} // closed when the running snapshot ends
	stoodDown atomic.Bool   // verifyFence found another live writer

	// Owned by the writer goroutine.
	next     uint64 // sequence of the next record
	fenceSeq uint64 // our fence record
	verified bool   // fence checked against a trim race
	fenced   error
	pending  *pendingWrite
	nonce    uint64
	// Group-commit pacing: size of the last batch and duration of the
	// last log write (see collect).
	lastBatch int
	lastWrite time.Duration
}

// pendingWrite is a record whose write failed ambiguously; it must be
// settled before anything else is written.
type pendingWrite struct {
	seq  uint64
	data []byte
	view *View // state if it landed
}

type request struct {
	txn  Txn
	size int
	done chan result
}

type result struct {
	seq uint64
	err error
}

func (r *request) reply(seq uint64, err error) { r.done <- result{seq, err} }

// Open opens the database under prefix as its writer, creating it if
// absent, and fences every earlier writer: their next durable write fails
// with ErrFenced. Open costs two sequential store round trips (list, then
// the reads and the fence in parallel) unless it races another writer.
func Open(ctx context.Context, store objstore.Store, prefix string, opts Options) (*DB, error) {
	return open(ctx, store, prefix, opts, true, nil)
}

// OpenExisting is Open, but returns ErrNotExist instead of creating a
// database.
func OpenExisting(ctx context.Context, store objstore.Store, prefix string, opts Options) (*DB, error) {
	return open(ctx, store, prefix, opts, false, nil)
}

// OpenExistingListed is OpenExisting starting from pre, a listing of the
// same prefix taken earlier (List), so that the open's first round trip
// overlaps other work and the open itself costs one: the reads and the
// fence. A listing of any age is safe: the fence lands after whatever
// was appended since, and a log trimmed since is listed again, exactly as
// for a listing taken just before the fence. One that found no database
// is not trusted (the database may have been created since) and is taken
// again.
func OpenExistingListed(ctx context.Context, store objstore.Store, prefix string, opts Options, pre *Listing) (*DB, error) {
	if pre != nil && pre.prefix != newDBStore(store, prefix).prefix {
		return nil, fmt.Errorf("refdb: open %s with a listing of %s", prefix, pre.prefix)
	}
	return open(ctx, store, prefix, opts, false, pre)
}

// Listing is one LIST of a database, for OpenExistingListed.
type Listing struct {
	prefix string
	l      listing
}

// List lists the database under prefix (one round trip).
func List(ctx context.Context, store objstore.Store, prefix string) (*Listing, error) {
	s := newDBStore(store, prefix)
	l, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	return &Listing{prefix: s.prefix, l: l}, nil
}

func open(ctx context.Context, store objstore.Store, prefix string, opts Options, create bool, pre *Listing) (*DB, error) {
	db := &DB{
		s:       newDBStore(store, prefix),
		opts:    opts.withDefaults(),
		reqs:    make(chan *request, queueLen),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if _, err := rand.Read(db.writer[:]); err != nil {
		return nil, fmt.Errorf("refdb: writer id: %w", err)
	}
	l, err := db.establish(ctx, create, pre)
	if err != nil {
		return nil, fmt.Errorf("refdb: open %s: %w", db.s.prefix, err)
	}
	db.cur.Store(l.view)
	db.fenceSeq = l.view.seq
	db.next = l.view.seq + 1
	db.snapSeq.Store(l.snapSeq)
	db.runCtx, db.cancelRun = context.WithCancel(context.WithoutCancel(ctx))
	go db.run()
	return db, nil
}

// establish loads the state and appends our fence record after it: the
// listing names the fence's place, so the fence is written while the
// snapshot and log records are read. If a previous writer is still
// appending, the fence moves forward past its records, which are then
// read and applied. The returned view includes the fence. pre, if it
// found a database, stands in for the first listing.
func (db *DB) establish(ctx context.Context, create bool, pre *Listing) (loaded, error) {
	var changed error // the last errRetry
	for range maxLoadAttempts {
		var (
			lst listing
			err error
		)
		if pre != nil && pre.l.any {
			lst, pre = pre.l, nil
		} else if lst, err = db.s.list(ctx); err != nil {
			return loaded{}, err
		}
		if !lst.any && !create {
			return loaded{}, ErrNotExist
		}
		from := lst.newest() + 1
		var (
			l          loaded
			seq        uint64
			loadErr    error
			fenceErr   error
			readAndPut sync.WaitGroup
		)
		readAndPut.Go(func() { l, loadErr = db.s.loadFrom(ctx, lst) })
		seq, fenceErr = db.placeFence(ctx, from)
		readAndPut.Wait()
		if errors.Is(loadErr, errRetry) {
			// The log changed under the listing (a snapshot trimmed it):
			// list again; a fence already placed stays behind as a
			// harmless empty record.
			changed = loadErr
			continue
		}
		if err := errors.Join(loadErr, fenceErr); err != nil {
			return loaded{}, err
		}
		if l.view.seq+1 != from {
			return loaded{}, fmt.Errorf("%w: %s: listing ends at %d, state at %d", ErrCorrupt, db.s.prefix, from-1, l.view.seq)
		}
		recs, err := db.s.readLogs(ctx, from, seq-1)
		if errors.Is(err, objstore.ErrNotFound) {
			// Skipped records were trimmed by the previous writer's
			// snapshot; our fence stays behind as a harmless empty record.
			continue
		}
		if err != nil {
			return loaded{}, err
		}
		v := l.view
		for i, r := range recs {
			v = v.apply(from+uint64(i), r.muts)
		}
		l.view = v.apply(seq, nil)
		return l, nil
	}
	if changed != nil {
		// As load: a log that never reads whole is corrupt, not busy.
		return loaded{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, db.s.prefix, changed)
	}
	return loaded{}, errors.New("refdb: could not fence: the log kept changing")
}

// placeFence creates an empty record of ours at the first free sequence
// from from on. Fence records carry no state, so a lost race just moves
// on to the next sequence without reading anything.
func (db *DB) placeFence(ctx context.Context, from uint64) (uint64, error) {
	for seq := from; seq < from+maxFenceAttempts; seq++ {
		db.nonce++
		rec := encodeLog(&logRecord{writer: db.writer, nonce: db.nonce, seq: seq})
		err := db.s.put(ctx, db.s.walKey(seq), rec)
		if err == nil {
			return seq, nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("refdb: could not fence: another writer appended %d records meanwhile", maxFenceAttempts)
}

// View returns the current committed state.
func (db *DB) View() *View { return db.cur.Load() }

// Get reads key from the current committed state. The value must not be
// modified.
func (db *DB) Get(key string) ([]byte, bool) { return db.View().Get(key) }

// Commit applies txn all or nothing and returns the sequence of the log
// record that made it durable. Errors: *ConflictError (nothing applied),
// ErrFenced, ErrClosed, ErrInvalidTxn, or a store error wrapped with
// ErrUncertain (not acknowledged; may or may not become visible, whole).
// If ctx ends first the transaction may still commit.
func (db *DB) Commit(ctx context.Context, txn Txn) (uint64, error) {
	if obs := db.opts.ObserveCommit; obs != nil {
		start := time.Now()
		seq, err := db.commit(ctx, txn)
		obs(time.Since(start), err)
		return seq, err
	}
	return db.commit(ctx, txn)
}

func (db *DB) commit(ctx context.Context, txn Txn) (uint64, error) {
	r, err := newRequest(txn)
	if err != nil {
		return 0, err
	}
	select {
	case <-db.closing:
		return 0, ErrClosed
	default:
	}
	select {
	case db.reqs <- r:
	case <-db.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, fmt.Errorf("refdb: commit: %w", ctx.Err())
	}
	select {
	case res := <-r.done:
		return res.seq, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("refdb: commit: %w (the transaction may still commit)", ctx.Err())
	case <-db.done:
		select {
		case res := <-r.done:
			return res.seq, res.err
		default:
			return 0, ErrClosed
		}
	}
}

// newRequest validates txn and copies its byte slices, so neither the
// caller's later edits nor the state can alias each other.
func newRequest(txn Txn) (*request, error) {
	size := 0
	for _, op := range txn {
		if op.Key == "" {
			return nil, fmt.Errorf("%w: empty key", ErrInvalidTxn)
		}
		if op.Cond > IfEquals {
			return nil, fmt.Errorf("%w: unknown condition %d on %q", ErrInvalidTxn, op.Cond, op.Key)
		}
		size += len(op.Key) + len(op.Value) + len(op.Expect)
	}
	arena := make([]byte, 0, size)
	cp := make(Txn, len(txn))
	for i, op := range txn {
		if op.Value != nil {
			arena = append(arena, op.Value...)
			op.Value = arena[len(arena)-len(op.Value) : len(arena) : len(arena)]
		}
		if op.Expect != nil {
			arena = append(arena, op.Expect...)
			op.Expect = arena[len(arena)-len(op.Expect) : len(arena) : len(arena)]
		}
		cp[i] = op
	}
	return &request{txn: cp, size: size, done: make(chan result, 1)}, nil
}

// applyTxn evaluates txn against v: the new state and the mutations, or a
// *ConflictError.
func applyTxn(v *View, txn Txn) (*View, []mutation, error) {
	muts := make([]mutation, 0, len(txn))
	for _, op := range txn {
		cur, ok := v.Get(op.Key)
		switch op.Cond {
		case IfAbsent:
			if ok {
				return nil, nil, &ConflictError{Key: op.Key}
			}
		case IfEquals:
			if !equalValue(cur, ok, op.Expect) {
				return nil, nil, &ConflictError{Key: op.Key}
			}
		}
		if op.CheckOnly {
			continue
		}
		m := mutation{key: op.Key, value: op.Value, delete: op.Delete}
		if !m.delete && m.value == nil {
			m.value = []byte{}
		}
		v = v.with(m)
		muts = append(muts, m)
	}
	return v, muts, nil
}

// run is the writer goroutine.
func (db *DB) run() {
	defer close(db.done)
	// Every open appends a fence: a database that is opened often and
	// written rarely would otherwise grow its log, and every open's reads
	// with it, without bound. So an open whose log is due snapshots, once
	// the fence is checked (a snapshot is a write). Otherwise the check
	// waits for the first commit (process): a database opened only to be
	// read, as most cold opens are, costs no LIST beyond its open.
	if v := db.cur.Load(); db.snapshotDue(v) {
		if err := db.verifyFence(db.runCtx); err != nil {
			db.opts.Logger.Warn("refdb: fence check failed; retrying before the first write",
				zap.String("prefix", db.s.prefix), zap.Error(err))
		} else if db.fenced == nil {
			db.maybeSnapshot(v)
		}
	}
	for {
		select {
		case <-db.closing:
			db.failQueued()
			return
		default:
		}
		var first *request
		select {
		case first = <-db.reqs:
		case <-db.closing:
			db.failQueued()
			return
		}
		db.process(db.collect(first))
	}
}

// collect gathers the batch that starts with first: everything already
// queued, after the optional flush delay.
//
// Without a flush delay, concurrent committers fall into lockstep: they
// are all answered together, and the first to resubmit would be written
// alone while the rest queue behind it, doubling their latency. So after
// a batch of B > 1 transactions the writer waits briefly (at most 1/16 of
// the last write's duration, capped at 5ms) for B requests to gather. A
// lone committer (B = 1) is written at once: serial latency has no floor.
func (db *DB) collect(first *request) []*request {
	batch := []*request{first}
	size := first.size
	var wait time.Duration
	target := maxBatchTxns
	if d := db.opts.FlushInterval; d > 0 {
		wait = d
	} else if db.lastBatch > 1 {
		wait = min(db.lastWrite/16, 5*time.Millisecond)
		target = min(db.lastBatch, maxBatchTxns)
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
	gather:
		for len(batch) < target && size < maxBatchBytes {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
				size += r.size
			case <-t.C:
				break gather
			case <-db.closing:
				break gather
			}
		}
	}
	for len(batch) < maxBatchTxns && size < maxBatchBytes {
		select {
		case r := <-db.reqs:
			batch = append(batch, r)
			size += r.size
		default:
			return batch
		}
	}
	return batch
}

func (db *DB) failQueued() {
	for {
		select {
		case r := <-db.reqs:
			r.reply(0, ErrClosed)
		default:
			return
		}
	}
}

func failAll(batch []*request, err error) {
	for _, r := range batch {
		r.reply(0, err)
	}
}

// process writes one batch as one log record.
func (db *DB) process(batch []*request) {
	ctx := db.runCtx
	if db.pending != nil {
		if err := db.settle(ctx); err != nil {
			// Nothing of this batch was written: a plain failure.
			failAll(batch, fmt.Errorf("refdb: commit not written: settling an earlier write: %w", err))
			return
		}
	}
	if !db.verified {
		if err := db.verifyFence(ctx); err != nil {
			failAll(batch, err)
			return
		}
	}
	if db.fenced != nil {
		failAll(batch, db.fenced)
		return
	}
	db.throttle()

	work := db.cur.Load()
	var muts []mutation
	accepted := batch[:0:0]
	for _, r := range batch {
		next, m, err := applyTxn(work, r.txn)
		if err != nil {
			r.reply(0, err)
			continue
		}
		work = next
		muts = append(muts, m...)
		accepted = append(accepted, r)
	}
	// Check-only transactions are written too: a landed record is what
	// proves this handle is still the writer.
	if len(accepted) == 0 {
		return
	}
	db.lastBatch = len(batch)
	seq := db.next
	db.nonce++
	data := encodeLog(&logRecord{writer: db.writer, nonce: db.nonce, seq: seq, muts: muts})
	after := &View{root: work.root, n: work.n, seq: seq}
	start := time.Now()
	err := db.write(ctx, seq, data)
	db.lastWrite = time.Since(start)
	if err != nil {
		if !errors.Is(err, ErrFenced) {
			db.pending = &pendingWrite{seq: seq, data: data, view: after}
			err = fmt.Errorf("refdb: commit at sequence %d: %w: %w", seq, ErrUncertain, err)
		}
		failAll(accepted, err)
		return
	}
	db.landed(after)
	for _, r := range accepted {
		r.reply(seq, nil)
	}
}

// write creates log record seq. An existing record that is byte-identical
// is an earlier attempt of ours that landed; any other means a newer
// writer fenced us (db.fenced is set).
func (db *DB) write(ctx context.Context, seq uint64, data []byte) error {
	if d := db.opts.WriteTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	key := db.s.walKey(seq)
	err := db.s.put(ctx, key, data)
	if err == nil || !errors.Is(err, objstore.ErrExists) {
		return err
	}
	mine, err := db.s.holds(ctx, key, data)
	if err != nil {
		return err
	}
	if mine {
		return nil
	}
	db.fenced = fmt.Errorf("%w: %s was written by another writer", ErrFenced, key)
	return db.fenced
}

// settle resolves the pending ambiguous write by writing the same bytes
// again: it either lands now, is found already there, or collides with a
// newer writer. Rewriting (rather than moving on) makes a delayed landing
// of the first attempt harmless.
func (db *DB) settle(ctx context.Context) error {
	p := db.pending
	err := db.write(ctx, p.seq, p.data)
	if errors.Is(err, ErrFenced) {
		db.pending = nil
		return nil // db.fenced is set; the caller reports it
	}
	if err != nil {
		return err
	}
	db.pending = nil
	db.landed(p.view)
	return nil
}

// landed publishes a durable record's state and schedules a snapshot.
func (db *DB) landed(v *View) {
	db.cur.Store(v)
	db.next = v.seq + 1
	db.maybeSnapshot(v)
}

// maybeSnapshot starts a snapshot of v once the log since the last one
// holds SnapshotEvery records. Called from the writer goroutine only.
func (db *DB) maybeSnapshot(v *View) {
	if db.snapshotDue(v) && db.snapping.CompareAndSwap(false, true) {
		db.snapDone = make(chan struct{})
		db.bg.Add(1)
		go db.snapshot(v, db.snapDone)
	}
}

// snapshotDue reports whether the log since the last snapshot holds
// SnapshotEvery records at v.
func (db *DB) snapshotDue(v *View) bool {
	return v.seq-db.snapSeq.Load() >= uint64(db.opts.SnapshotEvery)
}

// throttle bounds the log tail (and so the open cost) when records land
// faster than snapshots: beyond two snapshot intervals the writer waits
// for the running snapshot.
func (db *DB) throttle() {
	if db.snapping.Load() && db.next-1-db.snapSeq.Load() >= 2*uint64(db.opts.SnapshotEvery) {
		<-db.snapDone
	}
}

// verifyFence closes a race Open cannot see: a previous writer that
// snapshotted and trimmed the log between our listing and our fence could
// have deleted the very record our fence re-created, and would not be
// fenced. Its newest record is never trimmed, so any record after our
// fence before our first write means another writer is live: we stand
// down rather than risk losing its acknowledged commits.
func (db *DB) verifyFence(ctx context.Context) error {
	if db.verified {
		return nil
	}
	seqs, err := db.s.listWAL(ctx, db.fenceSeq)
	if err != nil {
		return fmt.Errorf("refdb: checking fence: %w", err)
	}
	db.verified = true
	if len(seqs) > 0 && db.fenced == nil {
		db.fenced = fmt.Errorf("%w: %s follows our fence", ErrFenced, db.s.walKey(seqs[0]))
		db.stoodDown.Store(true)
	}
	return nil
}

// snapshot writes the full state at v.seq, then deletes older snapshots
// and the log records below the previous snapshot. Trimming lags one
// snapshot interval so that a concurrent opener, which fences at the
// record after the newest one it listed, cannot re-create a trimmed
// record unless this writer appended a whole interval during the opener's
// round trip between listing and fencing (verifyFence catches even
// that). The newest record always survives.
func (db *DB) snapshot(v *View, done chan struct{}) {
	defer db.bg.Done()
	defer close(done)
	defer db.snapping.Store(false)
	ctx := db.runCtx
	log := db.opts.Logger.With(zap.String("prefix", db.s.prefix), zap.Uint64("seq", v.seq))
	key := db.s.snapKey(v.seq)
	if err := db.s.put(ctx, key, encodeSnapshot(v)); err != nil && !errors.Is(err, objstore.ErrExists) {
		log.Warn("refdb: snapshot failed", zap.Error(err))
		return
	}
	prev := db.snapSeq.Swap(v.seq)
	var old []string
	for _, dir := range []string{snapDir, walDir} {
		below := v.seq
		if dir == walDir {
			below = prev
		}
		for info, err := range db.s.store.List(ctx, db.s.prefix+dir, "") {
			if err != nil {
				log.Warn("refdb: trim listing failed", zap.Error(err))
				return
			}
			seq, ok := parseSeqKey(db.s.prefix, dir, info.Key)
			if !ok {
				continue
			}
			if seq >= below {
				break
			}
			old = append(old, info.Key)
		}
	}
	if err := deleteKeys(ctx, db.s.store, old); err != nil {
		log.Warn("refdb: trim failed", zap.Error(err))
	}
}

// Close stops the writer: queued commits fail with ErrClosed; a write in
// flight and a running snapshot finish, unless ctx ends first, in which
// case they are cancelled (an interrupted write stays unacknowledged).
func (db *DB) Close(ctx context.Context) error {
	db.closeOnce.Do(func() { close(db.closing) })
	idle := make(chan struct{})
	go func() {
		<-db.done
		db.bg.Wait()
		close(idle)
	}()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = fmt.Errorf("refdb: close %s: %w", db.s.prefix, ctx.Err())
		db.cancelRun()
		<-idle
	}
	db.cancelRun()
	return err
}
