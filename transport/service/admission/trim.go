package admission

import (
	"context"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

// Returning memory to the OS when idle. Indexing a big push or serving a
// big clone grows the heap by hundreds of MiB; when the node then falls
// quiet nothing allocates, so no collection runs (but the runtime's forced
// one every two minutes) and the background scavenger only returns what
// lies above the last heap goal: the node keeps its peak for minutes. A
// Trimmer collects and returns everything once the work is over. Under a
// GOMEMLIMIT the runtime scavenges near the limit by itself; this covers
// the idle node below it.

// TrimSlack and TrimGrowth set how much the retained memory must have
// grown since the last trim before an idle node trims again: TrimSlack,
// or 1/TrimGrowth of what it kept then if that is more. A node whose
// caches are legitimately large is not collected over and over for
// nothing, and a small one does not keep a third more than it needs (the
// heap freed after a roll-up or a burst of pushes, 10 to 20 MiB on a node
// of 40) until the runtime's forced collection every two minutes.
const (
	TrimSlack  = 8 << 20
	TrimGrowth = 4
)

// TrimEvery is the default interval between checks.
const TrimEvery = 10 * time.Second

// ShouldTrim decides a trim, with retained the memory the runtime holds
// from the OS now and after what it held right after the last trim (or at
// start):
//
//	pack work running                                      no: it needs the memory again soon
//	retained < after + max(TrimSlack, after/TrimGrowth)    no: nothing worth a collection
//	otherwise                                              yes
func ShouldTrim(idle bool, retained, after uint64) bool {
	return idle && retained >= after+max(TrimSlack, after/TrimGrowth)
}

// Trimmer returns memory to the OS when the node is idle. The functions
// are the node's (Controller.Idle, RetainedBytes, debug.FreeOSMemory)
// except in tests.
type Trimmer struct {
	Every    time.Duration
	Idle     func() bool
	Retained func() uint64
	Free     func()
	// Trimmed, if set, is called after each trim with the retained bytes
	// before and after (a log line).
	Trimmed func(before, after uint64)

	kickOnce sync.Once
	kick     chan struct{}
}

// Check asks Run for a check now rather than at its next tick: work
// admission does not count (background maintenance) has just ended. It
// never blocks; checks asked for while one is pending merge.
func (t *Trimmer) Check() {
	select {
	case t.kicks() <- struct{}{}:
	default:
	}
}

func (t *Trimmer) kicks() chan struct{} {
	t.kickOnce.Do(func() { t.kick = make(chan struct{}, 1) })
	return t.kick
}

// NewTrimmer is the node's trimmer for c (nil: always idle).
func NewTrimmer(c *Controller) *Trimmer {
	return &Trimmer{Every: TrimEvery, Idle: c.Idle, Retained: RetainedBytes, Free: debug.FreeOSMemory}
}

// Run checks every t.Every, and when Check asks, until ctx ends.
func (t *Trimmer) Run(ctx context.Context) {
	tick := time.NewTicker(t.Every)
	defer tick.Stop()
	after := t.Retained()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.kicks():
		}
		before := t.Retained()
		if !ShouldTrim(t.Idle(), before, after) {
			continue
		}
		t.Free()
		after = t.Retained()
		if t.Trimmed != nil {
			t.Trimmed(before, after)
		}
	}
}

// RetainedBytes is the memory the Go runtime holds from the OS: all it has
// mapped minus the heap it has released.
func RetainedBytes() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 || s[1].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// Idle reports whether no admitted pack work is running.
func (c *Controller) Idle() bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Active == 0
}
