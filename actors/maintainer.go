package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/repo"
)

// Background maintenance: after a push adds a pack, the node rolls up the
// repository's smallest packs (repo.PlanGeometric, repo.BuildRollUp) so
// the pack count stays logarithmic in the objects. Builds run outside the
// repo actor from a session snapshot, with bounded concurrency per node;
// only the switch is a message to the actor (commitRepack), so pushes and
// clones never wait for a roll-up.

// maintPhase is one repository's place in the maintenance schedule.
type maintPhase uint8

const (
	maintIdle    maintPhase = iota // nothing scheduled (no map entry)
	maintQueued                    // a job is waiting for a slot
	maintRunning                   // a job is running
	maintRerun                     // running, and asked again meanwhile
)

// maintEvent is what happens to a repository's schedule.
type maintEvent uint8

const (
	maintRequested maintEvent = iota // a push added a pack
	maintStarted                     // the job got a slot
	maintFinished                    // the job ended (whatever its result)
)

// maintStep is the per-repository debounce: at most one job per
// repository is queued or running, and a request during a run starts one
// more run afterwards (the push it stands for is not in the running job's
// snapshot). spawn says the caller must start a job.
//
//	phase    requested      started   finished
//	idle     queued, spawn  -         -
//	queued   queued         running   -
//	running  rerun          -         idle
//	rerun    rerun          -         queued, spawn
func maintStep(p maintPhase, ev maintEvent) (next maintPhase, spawn bool) {
	switch {
	case ev == maintRequested && p == maintIdle:
		return maintQueued, true
	case ev == maintRequested && p == maintRunning:
		return maintRerun, false
	case ev == maintStarted && p == maintQueued:
		return maintRunning, false
	case ev == maintFinished && p == maintRunning:
		return maintIdle, false
	case ev == maintFinished && p == maintRerun:
		return maintQueued, true
	}
	return p, false
}

// maintainer runs the node's background maintenance.
type maintainer struct {
	node  *Node
	slots chan struct{} // one token per job allowed to run at once
	ctx   context.Context
	stop  context.CancelFunc
	m     *maintMetrics
	gc    *gcMetrics

	mu     sync.Mutex
	phases map[repoKey]maintPhase
	jobs   sync.WaitGroup
	idle   chan struct{} // closed while no repository is scheduled
}

type maintMetrics struct {
	runs      *prometheus.CounterVec
	rewritten prometheus.Counter
	seconds   prometheus.Histogram
	packs     prometheus.Histogram
}

func newMaintMetrics(reg prometheus.Registerer) *maintMetrics {
	m := &maintMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_repack_runs_total",
			Help: "Background roll-ups of small packs, by result (rolled_up, nothing, conflict, error)."},
			[]string{"result"}),
		rewritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_repack_bytes_written_total", Help: "Pack bytes written by background roll-ups."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_repack_seconds", Help: "Time one background roll-up took, build and switch.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9)}),
		packs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_repo_packs", Help: "Packs a repository has after each background maintenance check.",
			Buckets: []float64{1, 2, 4, 8, 12, 16, 32, 64, 128, 256}}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.rewritten, m.seconds, m.packs)
	}
	return m
}

func newMaintainer(n *Node, slots int, reg prometheus.Registerer) *maintainer {
	ctx, stop := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &maintainer{node: n, slots: make(chan struct{}, max(slots, 1)), ctx: ctx, stop: stop,
		m: newMaintMetrics(reg), gc: newGCMetrics(reg), phases: map[repoKey]maintPhase{}, idle: idle}
}

// step applies ev to key's schedule and starts a job when it says so.
func (m *maintainer) step(key repoKey, ev maintEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil && ev == maintRequested {
		return // shutting down
	}
	p, spawn := maintStep(m.phases[key], ev)
	if p == maintIdle {
		delete(m.phases, key)
		if len(m.phases) == 0 {
			close(m.idle)
		}
	} else {
		if len(m.phases) == 0 {
			m.idle = make(chan struct{})
		}
		m.phases[key] = p
	}
	if spawn {
		m.jobs.Add(1)
		go m.job(key)
	}
}

// job waits for a slot and runs one maintenance check of key.
func (m *maintainer) job(key repoKey) {
	defer m.jobs.Done()
	defer m.step(key, maintFinished)
	select {
	case m.slots <- struct{}{}:
	case <-m.ctx.Done():
		// Queued never became running: finishing from queued is a no-op,
		// so mark it started first.
		m.step(key, maintStarted)
		return
	}
	defer func() { <-m.slots }()
	m.step(key, maintStarted)
	owner, name := key.split()
	start := time.Now()
	result, err := m.rollUp(owner, name)
	if err != nil && !errors.Is(err, context.Canceled) {
		m.node.log.Warn("background roll-up failed", zap.String("repo", string(key)), zap.Error(err))
	}
	m.m.runs.WithLabelValues(result).Inc()
	if result != "nothing" {
		m.m.seconds.Observe(time.Since(start).Seconds())
	}
}

// rollUp checks owner/name's packs and rolls up the smallest ones if they
// no longer form a geometric progression. It reports the result label.
func (m *maintainer) rollUp(owner, name string) (string, error) {
	ctx := m.ctx
	s, err := m.node.Session(ctx, owner, name)
	if err != nil {
		return "error", err
	}
	defer s.Release()
	roll := repo.PlanGeometric(s.Snapshot.Packs, repo.GeometricFactor)
	if roll == nil {
		m.m.packs.Observe(float64(len(s.Snapshot.Packs)))
		return "nothing", nil
	}
	if m.node.testBeforeRollUp != nil {
		m.node.testBeforeRollUp(owner, name)
	}
	b, err := repo.BuildRollUp(ctx, m.node.cfg.Deps, s.Snapshot, roll, nil)
	if err != nil || b == nil {
		return "error", err
	}
	m.m.rewritten.Add(float64(b.Pack.Size))
	pack, err := m.node.commitRepack(ctx, s, b)
	switch {
	case errors.Is(err, repo.ErrConcurrentUpdate):
		// An admin repack or another node's roll-up replaced some of the
		// packs; the uploaded pack is garbage for GC. The next push plans
		// again.
		return "conflict", err
	case err != nil:
		return "error", err
	}
	m.m.packs.Observe(float64(len(s.Snapshot.Packs) - len(roll) + 1))
	m.node.log.Debug("rolled up packs", zap.String("repo", owner+"/"+name),
		zap.Int("packs", len(roll)), zap.String("into", pack.Name), zap.Int("objects", pack.Objects))
	return "rolled_up", nil
}

// wait returns once no repository is scheduled, or when ctx ends.
func (m *maintainer) wait(ctx context.Context) error {
	m.mu.Lock()
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown cancels running jobs and waits for them to end.
func (m *maintainer) shutdown() {
	m.stop()
	m.jobs.Wait()
}

// Maintain asks for background maintenance of owner/name (a push added a
// pack): it returns at once; a roll-up runs later if the packs need one.
// Requests for a repository already scheduled are merged.
func (n *Node) Maintain(owner, name string) {
	if n.cfg.MaintenanceSlots < 0 {
		return
	}
	n.maint.step(keyOf(owner, name), maintRequested)
}

// WaitMaintenance returns once no background maintenance is scheduled or
// running (tests and benchmarks), or when ctx ends.
func (n *Node) WaitMaintenance(ctx context.Context) error {
	return n.maint.wait(ctx)
}
