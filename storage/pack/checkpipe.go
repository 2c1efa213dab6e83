package pack

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/rgit/rgit/storage/object"
)

// Pass 1 inflates one entry after another on one goroutine: where an entry
// ends is only known once it is inflated. Hashing the whole objects it
// inflates and handing commits, trees and tags to IndexOptions.Check
// (fsck, for a push) need not wait for that, so a checkPipe does both on a
// second goroutine, the other core of a small node. Inflating stays the
// one serial cost of pass 1.
const (
	// maxPipedCheck: bigger objects are hashed and checked in line,
	// streamed rather than held, so one cannot take the whole budget.
	maxPipedCheck = 1 << 20
	// pipedCheckBytes bounds the content waiting in the pipe.
	pipedCheckBytes = 8 << 20
)

type checkJob struct {
	idx  int32
	typ  object.Type
	data []byte
}

// checked is an entry's id, as the pipe computed it.
type checked struct {
	idx int32
	id  object.ID
}

type checkPipe struct {
	check  func(object.ID, object.Type, []byte) error // nil: hash only
	ctx    context.Context
	budget *semaphore.Weighted
	jobs   chan checkJob
	done   chan struct{}
	once   sync.Once
	failed atomic.Bool
	err    error     // the first Check error; read after done
	ids    []checked // read after done
}

func startChecks(ctx context.Context, check func(object.ID, object.Type, []byte) error) *checkPipe {
	p := &checkPipe{check: check, ctx: ctx, budget: semaphore.NewWeighted(pipedCheckBytes),
		jobs: make(chan checkJob, 256), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *checkPipe) run() {
	defer close(p.done)
	for j := range p.jobs {
		if !p.failed.Load() {
			id := object.Hash(j.typ, j.data)
			if err := p.checkOne(id, j.typ, j.data); err != nil {
				p.err = err
				p.failed.Store(true)
			} else {
				p.ids = append(p.ids, checked{j.idx, id})
			}
		}
		p.budget.Release(int64(len(j.data)))
	}
}

// checkOne passes a commit, tree or tag to the check, if there is one.
func (p *checkPipe) checkOne(id object.ID, t object.Type, data []byte) error {
	if p.check == nil || t == object.Blob {
		return nil
	}
	return p.check(id, t, data)
}

// send queues entry idx's content, waiting while the pipe holds its
// budget. It returns the context's error, or a Check error as soon as one
// is known (the entries before may still be unchecked: pass 1 stops).
func (p *checkPipe) send(idx int32, t object.Type, data []byte) error {
	if p.failed.Load() {
		return p.stop()
	}
	if err := p.budget.Acquire(p.ctx, int64(len(data))); err != nil {
		return err
	}
	p.jobs <- checkJob{idx, t, data}
	return nil
}

// stop waits for the queued checks and returns the first Check error.
func (p *checkPipe) stop() error {
	p.once.Do(func() { close(p.jobs) })
	<-p.done
	return p.err
}
