package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
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
// in flight. Memory: at most opt.Streams chunks are buffered.
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
	p.mu.Lock()
	for i := range min(len(p.chunks), opt.Streams) {
		p.startLocked(i)
	}
	// The first chunk reads on from the Get's body; the rest is dropped.
	p.chunks[0].first = rc
	p.mu.Unlock()
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
	wg     sync.WaitGroup
	closed bool
}

// chunk is one ranged read; buf fills up to len(buf) (guarded by mu).
type chunk struct {
	off   int64
	buf   []byte
	n     int
	err   error
	first io.ReadCloser // chunk 0: the Get's body, to read before any ranged retry
}

// startLocked starts the read of chunk i. Called with p.mu held.
func (p *parallelReader) startLocked(i int) {
	off := int64(i) * p.opt.Chunk
	c := &chunk{off: off, buf: make([]byte, min(p.opt.Chunk, p.size-off))}
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
		if p.pos < c.n {
			n := copy(b, c.buf[p.pos:c.n])
			p.pos += n
			if p.pos == len(c.buf) {
				// Done with this chunk: free it and start the next in line.
				p.chunks[p.cur] = &chunk{}
				p.cur, p.pos = p.cur+1, 0
				if next := p.cur + p.opt.Streams - 1; next < len(p.chunks) && p.chunks[next] == nil {
					p.startLocked(next)
				}
			}
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		p.cond.Wait()
	}
}

// Close cancels the reads in flight and waits for them.
func (p *parallelReader) Close() error {
	p.cancel()
	p.mu.Lock()
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
	return nil
}
