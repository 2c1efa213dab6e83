package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// ParallelOptions tunes GetParallel. Zero fields take the defaults.
type ParallelOptions struct {
	// Chunk is the size of one ranged read (default 4 MiB). Objects no
	// larger than one chunk are read with the single Get.
	Chunk int64
	// Streams bounds the ranged reads in flight, which is also how many
	// chunks are buffered at most (default 8).
	Streams int
	// Attempts is how often one chunk is tried (default 3): a chunk whose
	// read fails, at the open or mid-body, is read again from where it
	// broke.
	Attempts int
	// Budget bounds the chunk buffers of every read sharing it (default:
	// the process's shared budget, 64 MiB).
	Budget *ChunkBudget
}

// ChunkBudget bounds the bytes of chunk buffers that the GetParallel
// reads sharing it hold at once, so a node downloading many packs at once
// (a burst of cold repositories) stays within a fixed memory bound
// instead of Streams × Chunk per object. Each read takes its chunks in
// order, so the chunk a reader needs next is always the first of its
// chunks to get room: every reader holding room can make progress, and
// the readers waiting for room are served first come, first served.
// A chunk larger than the whole budget waits until it has the budget to
// itself. Safe for concurrent use.
type ChunkBudget struct {
	max  int64
	sem  *semaphore.Weighted
	used atomic.Int64
	peak atomic.Int64
}

// NewChunkBudget returns a budget of n bytes of chunk buffers.
func NewChunkBudget(n int64) *ChunkBudget {
	return &ChunkBudget{max: n, sem: semaphore.NewWeighted(n)}
}

// sharedBudget is the budget of reads that set none: 64 MiB, room for
// two objects read at full depth with the default options (8 streams of
// 4 MiB; at 100 MB/s and 20 ms per request, 8 streams already move about
// what a node's network does) however many downloads run at once.
// Unexported, so that nothing (a test included) swaps the process's
// bound: a read that wants another bound sets ParallelOptions.Budget.
var sharedBudget = NewChunkBudget(64 << 20)

// InUse is the bytes of chunk buffers held now.
func (b *ChunkBudget) InUse() int64 { return b.used.Load() }

// Peak is the most bytes of chunk buffers held at once so far.
func (b *ChunkBudget) Peak() int64 { return b.peak.Load() }

func (b *ChunkBudget) acquire(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, min(n, b.max)); err != nil {
		return err
	}
	used := b.used.Add(n)
	for {
		peak := b.peak.Load()
		if used <= peak || b.peak.CompareAndSwap(peak, used) {
			return nil
		}
	}
}

func (b *ChunkBudget) release(n int64) {
	b.used.Add(-n)
	b.sem.Release(min(n, b.max))
}

func (o ParallelOptions) withDefaults() ParallelOptions {
	if o.Chunk <= 0 {
		o.Chunk = 4 << 20
	}
	if o.Streams <= 0 {
		o.Streams = 8
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Budget == nil {
		o.Budget = sharedBudget
	}
	return o
}

// GetParallel opens key like Get and returns its bytes in order, but reads
// a large object as ranged reads of opt.Chunk bytes, up to opt.Streams at
// once: against a store with per-request latency and per-connection
// bandwidth (S3), a big pack arrives several times faster than through one
// stream, and the caller can consume the first bytes while later chunks are
// still in flight. The first chunk comes from the Get that learns the size
// (no extra round trip). A chunk that fails is retried (opt.Attempts); an
// error the retries do not cure is returned by Read. Close stops every read
// in flight. Memory: at most opt.Streams chunks are buffered, and each
// takes room in opt.Budget first, so the reads sharing a budget hold at
// most its bytes together. A caller that opens several reads on one
// budget must consume them concurrently (or each to its end in turn): a
// read that is not consumed keeps its room.
func GetParallel(ctx context.Context, s Store, key string, opt ParallelOptions) (io.ReadCloser, ObjectInfo, error) {
	opt = opt.withDefaults()
	rc, info, err := s.Get(ctx, key)
	if err != nil || info.Size <= opt.Chunk {
		return rc, info, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &parallelReader{ctx: ctx, cancel: cancel, s: s, key: key, size: info.Size, opt: opt}
	p.cond = sync.NewCond(&p.mu)
	p.chunks = make([]*chunk, (info.Size+opt.Chunk-1)/opt.Chunk)
	if err := opt.Budget.acquire(ctx, p.chunkLen(0)); err != nil {
		cancel()
		rc.Close()
		return nil, ObjectInfo{}, fmt.Errorf("read %s: wait for buffer room: %w", key, err)
	}
	p.mu.Lock()
	p.startLocked(0)
	// The first chunk reads on from the Get's body; the rest is dropped.
	p.chunks[0].first = rc
	p.mu.Unlock()
	p.wg.Add(1)
	go p.startRest()
	return p, info, nil
}

type parallelReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      Store
	key    string
	size   int64
	opt    ParallelOptions

	mu     sync.Mutex
	cond   *sync.Cond
	chunks []*chunk // nil: not started yet
	cur    int      // chunk being consumed
	pos    int      // bytes of chunks[cur] consumed
	err    error    // why a chunk could not be started
	wg     sync.WaitGroup
	closed bool
}

// chunk is one ranged read; buf fills up to len(buf) (guarded by mu).
// Its buffer holds len(buf) bytes of the budget until consumed or closed.
type chunk struct {
	off   int64
	buf   []byte
	n     int
	err   error
	first io.ReadCloser // chunk 0: the Get's body, to read before any ranged retry
}

func (p *parallelReader) chunkLen(i int) int64 {
	off := int64(i) * p.opt.Chunk
	return min(p.opt.Chunk, p.size-off)
}

// startRest starts chunks 1.. in order, each once it is within
// opt.Streams of the chunk being consumed and has room in the budget.
func (p *parallelReader) startRest() {
	defer p.wg.Done()
	for i := 1; i < len(p.chunks); i++ {
		p.mu.Lock()
		for !p.closed && i >= p.cur+p.opt.Streams {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if err := p.opt.Budget.acquire(p.ctx, p.chunkLen(i)); err != nil {
			p.mu.Lock()
			p.err = fmt.Errorf("read %s: wait for buffer room: %w", p.key, err)
			p.cond.Broadcast()
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			p.opt.Budget.release(p.chunkLen(i))
			return
		}
		p.startLocked(i)
		p.mu.Unlock()
	}
}

// startLocked starts the read of chunk i, whose room in the budget is
// taken. Called with p.mu held.
func (p *parallelReader) startLocked(i int) {
	c := &chunk{off: int64(i) * p.opt.Chunk, buf: make([]byte, p.chunkLen(i))}
	p.chunks[i] = c
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.fill(c)
	}()
}

// fill reads chunk c, retrying from where a failed attempt broke off.
func (p *parallelReader) fill(c *chunk) {
	var last error
	for attempt := 0; attempt < p.opt.Attempts; attempt++ {
		p.mu.Lock()
		got, first := c.n, c.first
		c.first = nil
		p.mu.Unlock()
		if got == len(c.buf) {
			if first != nil {
				first.Close()
			}
			return
		}
		var rc io.ReadCloser = first
		if rc == nil {
			var err error
			if rc, err = p.s.GetRange(p.ctx, p.key, c.off+int64(got), int64(len(c.buf)-got)); err != nil {
				last = err
				if p.ctx.Err() != nil {
					break
				}
				continue
			}
		}
		last = p.read(c, rc)
		rc.Close()
		if last == nil || p.ctx.Err() != nil {
			break
		}
	}
	p.mu.Lock()
	if c.n < len(c.buf) {
		if last == nil {
			last = p.ctx.Err()
		}
		c.err = fmt.Errorf("read %s bytes %d-%d: %w", p.key, c.off, c.off+int64(len(c.buf))-1, last)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// read copies rc into the rest of c.buf, publishing progress as it goes.
func (p *parallelReader) read(c *chunk, rc io.Reader) error {
	const step = 256 << 10
	for {
		p.mu.Lock()
		n := c.n
		p.mu.Unlock()
		if n == len(c.buf) {
			return nil
		}
		// Only this goroutine writes c.buf[c.n:]; the reader stays below c.n.
		m, err := rc.Read(c.buf[n:min(len(c.buf), n+step)])
		if m > 0 {
			p.mu.Lock()
			c.n += m
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		if err != nil {
			if c.n == len(c.buf) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

func (p *parallelReader) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return 0, errors.New("objstore: read after close")
		}
		if p.cur == len(p.chunks) {
			return 0, io.EOF
		}
		c := p.chunks[p.cur]
		if c == nil {
			// Not started: waiting for room in the budget.
			if p.err != nil {
				return 0, p.err
			}
			p.cond.Wait()
			continue
		}
		if p.pos < c.n {
			n := copy(b, c.buf[p.pos:c.n])
			p.pos += n
			if p.pos == len(c.buf) {
				// Done with this chunk: free its room and let the next in
				// line start.
				p.opt.Budget.release(int64(len(c.buf)))
				p.chunks[p.cur] = &chunk{}
				p.cur, p.pos = p.cur+1, 0
				p.cond.Broadcast()
			}
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		p.cond.Wait()
	}
}

// Close cancels the reads in flight, waits for them and frees their room
// in the budget.
func (p *parallelReader) Close() error {
	p.cancel()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cond.Broadcast()
	for _, c := range p.chunks {
		if c != nil && c.first != nil {
			c.first.Close()
			c.first = nil
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	for i := p.cur; i < len(p.chunks); i++ {
		if c := p.chunks[i]; c != nil && c.buf != nil {
			p.opt.Budget.release(int64(len(c.buf)))
			c.buf = nil
		}
	}
	p.mu.Unlock()
	return nil
}
