package pktline

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultProgressInterval is the minimum time between two progress lines.
// git updates once a second or on every percent change; a fixed interval
// keeps band-2 traffic bounded for huge object counts while still looking
// live.
const DefaultProgressInterval = 200 * time.Millisecond

// Progress renders a git-style progress meter ("Counting objects:  45%
// (9/20)\r", then "..., done.\n") to w, throttled to one line per Interval.
// A nil *Progress is valid and does nothing, so callers can pass one
// around when the client asked for no-progress. Safe for concurrent use.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	title    string
	total    uint64
	cur      uint64
	shown    uint64
	last     time.Time
	started  bool
	done     bool
	interval time.Duration
	now      func() time.Time
}

// NewProgress starts a meter titled title counting up to total (0 when
// unknown: the line then shows only the count). It returns nil when w is
// nil.
func NewProgress(w io.Writer, title string, total uint64) *Progress {
	return NewProgressClock(w, title, total, DefaultProgressInterval, time.Now)
}

// NewProgressClock is NewProgress with an explicit throttle interval and
// clock, for tests.
func NewProgressClock(w io.Writer, title string, total uint64, interval time.Duration, now func() time.Time) *Progress {
	if w == nil {
		return nil
	}
	return &Progress{w: w, title: title, total: total, interval: interval, now: now}
}

// Set records the current count n and writes a line if the interval has
// passed since the previous one. Write errors are ignored: progress is
// advisory and a broken stream surfaces on the data band.
func (p *Progress) Set(n uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.cur = n
	t := p.now()
	if p.started && t.Sub(p.last) < p.interval {
		return
	}
	if p.started && n == p.shown {
		return
	}
	p.started, p.last, p.shown = true, t, n
	_, _ = io.WriteString(p.w, p.line(n, "\r"))
}

// Add increments the count by d.
func (p *Progress) Add(d uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	n := p.cur + d
	p.mu.Unlock()
	p.Set(n)
}

// Done writes the final "..., done." line with the last count. Later calls
// do nothing.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	_, _ = io.WriteString(p.w, p.line(p.cur, ", done.\n"))
}

func (p *Progress) line(n uint64, end string) string {
	if p.total == 0 {
		return fmt.Sprintf("%s: %d%s", p.title, n, end)
	}
	pct := n * 100 / p.total
	return fmt.Sprintf("%s: %3d%% (%d/%d)%s", p.title, pct, n, p.total, end)
}
