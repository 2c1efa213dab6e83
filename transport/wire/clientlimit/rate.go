package clientlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Rate is a minimum transfer rate with a grace period: a stream may fall
// behind BytesPerSec by at most Grace, and wait at most Grace for its
// first byte. With BytesPerSec 0 it is a plain stall timer: no transfer
// may wait longer than Grace. A zero Grace bounds nothing.
type Rate struct {
	Grace       time.Duration
	BytesPerSec int64
}

// credit is the time n bytes earn at the rate.
func (r Rate) credit(n int) time.Duration {
	if r.BytesPerSec <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(int64(n) * int64(time.Second) / r.BytesPerSec)
}

// Budget is the rate rule's state for one direction of one stream: the
// time the client may still take. Each transfer spends the time it
// waited and earns its bytes' worth at the rate; the budget never exceeds
// the grace, so a fast start does not buy a long stall later.
//
//	event                         budget after
//	new stream                    Grace
//	transfer of n bytes, took d   min(budget - d + n/BytesPerSec, Grace)
//	a transfer's deadline         start + budget (+ n/BytesPerSec for a
//	                              write of n bytes known in advance)
//
// A client that trickles one byte now and then loses about the time it
// waits each time and is cut off once its budget is spent; a client at
// or above the rate never is, however long the stream.
type Budget struct {
	rate Rate
	left time.Duration
}

// NewBudget starts a stream's budget at the grace.
func NewBudget(r Rate) Budget { return Budget{rate: r, left: r.Grace} }

// Due is the deadline of a transfer starting at start that moves n bytes
// if it completes (0 for a read, whose size is not known in advance).
// The zero time means no deadline.
func (b *Budget) Due(start time.Time, n int) time.Time {
	if b.rate.Grace <= 0 {
		return time.Time{}
	}
	return start.Add(max(b.left, 0) + b.rate.credit(n))
}

// Spend records a transfer that ran from start to end and moved n bytes.
func (b *Budget) Spend(start, end time.Time, n int) {
	if b.rate.Grace <= 0 {
		return
	}
	b.left = min(b.left-end.Sub(start)+b.rate.credit(n), b.rate.Grace)
}

// ErrTooSlow: the client fell further behind the minimum rate than the
// grace allows. It wraps context.DeadlineExceeded: the client is as good
// as gone, and front ends answer a timeout.
var ErrTooSlow = fmt.Errorf("client too slow: %w", context.DeadlineExceeded)

// DeadlineReader is a reader whose blocked reads a deadline cuts off with
// an error wrapping os.ErrDeadlineExceeded (net.Conn's contract; the zero
// time clears it).
type DeadlineReader interface {
	io.Reader
	SetReadDeadline(t time.Time) error
}

// Reader paces the reads of r by a Rate. Its SetReadDeadline adds a
// deadline of the caller's (the protocol layer bounds a whole request);
// a read cut off by that one fails with os.ErrDeadlineExceeded, one cut
// off by the rate with ErrTooSlow. Reads come from one goroutine at a
// time.
type Reader struct {
	r DeadlineReader
	b Budget

	mu      sync.Mutex
	request time.Time // the caller's deadline; zero: none
	// expired is set once a read was cut off: the stream is not to be
	// read again (an HTTP server must not wait for the rest of the body).
	expired bool
}

// NewReader paces r by rate.
func NewReader(r DeadlineReader, rate Rate) *Reader {
	return &Reader{r: r, b: NewBudget(rate)}
}

// SetReadDeadline sets the caller's deadline (zero: none).
func (p *Reader) SetReadDeadline(t time.Time) error {
	p.mu.Lock()
	p.request = t
	p.mu.Unlock()
	return nil
}

// Expired reports whether a read was cut off by either deadline.
func (p *Reader) Expired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expired
}

func (p *Reader) Read(buf []byte) (int, error) {
	p.mu.Lock()
	request := p.request
	p.mu.Unlock()
	start := time.Now()
	due := p.b.Due(start, 0)
	byRequest := !request.IsZero() && (due.IsZero() || request.Before(due))
	if byRequest {
		due = request
	}
	// A reader without deadlines (ErrNotSupported) stays unbounded.
	_ = p.r.SetReadDeadline(due)
	n, err := p.r.Read(buf)
	p.b.Spend(start, time.Now(), n)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		p.mu.Lock()
		p.expired = true
		p.mu.Unlock()
		if byRequest {
			return n, err
		}
		return n, fmt.Errorf("%w: fell behind %d bytes/s by more than %s reading", ErrTooSlow, p.b.rate.BytesPerSec, p.b.rate.Grace)
	}
	if !due.IsZero() {
		_ = p.r.SetReadDeadline(time.Time{})
	}
	return n, err
}

// DeadlineWriter is a writer whose blocked writes a deadline cuts off
// with an error wrapping os.ErrDeadlineExceeded.
type DeadlineWriter interface {
	io.Writer
	SetWriteDeadline(t time.Time) error
}

// Writer paces the writes of w by a Rate: a client that does not read
// the answer at the rate is cut off with ErrTooSlow. Writes come from one
// goroutine at a time.
type Writer struct {
	w DeadlineWriter
	b Budget
}

// NewWriter paces w by rate.
func NewWriter(w DeadlineWriter, rate Rate) *Writer {
	return &Writer{w: w, b: NewBudget(rate)}
}

func (p *Writer) Write(buf []byte) (int, error) {
	return p.Do(len(buf), func() (int, error) { return p.w.Write(buf) })
}

// Do runs op, a transfer of n bytes to the client (a write, or a flush of
// what earlier writes buffered with n 0), under the rate's deadline.
func (p *Writer) Do(n int, op func() (int, error)) (int, error) {
	start := time.Now()
	due := p.b.Due(start, n)
	_ = p.w.SetWriteDeadline(due)
	k, err := op()
	p.b.Spend(start, time.Now(), k)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return k, fmt.Errorf("%w: fell behind %d bytes/s by more than %s writing", ErrTooSlow, p.b.rate.BytesPerSec, p.b.rate.Grace)
	}
	if !due.IsZero() {
		_ = p.w.SetWriteDeadline(time.Time{})
	}
	return k, err
}
