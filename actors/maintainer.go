package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
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

// defaultUnbitmappedGrace is Config.UnbitmappedGrace's default.
const defaultUnbitmappedGrace = 10 * time.Minute

// maintKind is what one maintenance check of a repository does.
type maintKind uint8

const (
	maintNothing maintKind = iota
	maintRollUp            // roll up some packs (repo.BuildRollUp)
	maintFull              // roll up every pack with fresh deltas (repo.BuildFullRollUp)
)

// planMaintenance decides one maintenance check of a repository from its
// packs: a geometric roll-up as a rule, and occasionally a full repack,
// which searches deltas afresh over every object and writes one pack with
// a bitmap (it drops nothing, so pushes meanwhile cannot make it fail;
// unreachable objects go with an admin repack). Occasionally means on a
// size or an age threshold, or when the largest pack has no bitmap
// (bitmapped false): fetches answer from the largest pack's bitmap and
// walk only the commits of the smaller packs, so a largest pack without
// one (a big push into a repository that had a small first pack) sends
// every clone through a walk of the whole history until it is repacked.
// grace (Config.UnbitmappedGrace) lets the background build of a first
// push's bitmap finish first, and limits a repository whose bitmap cannot
// be built to one full repack per grace period.
//
//	packs                                          does
//	0 or 1                                         nothing
//	more than one, largest older than fullAge      full repack
//	more than one, largest without a bitmap and    full repack
//	  older than grace
//	a geometric progression                        nothing
//	the roll-up would take every pack (size:       full repack
//	  the small packs reached half the largest)
//	otherwise                                      roll up the plan's packs
func planMaintenance(packs []repo.PackInfo, bitmapped bool, now time.Time, fullAge, grace time.Duration) (maintKind, []string) {
	if len(packs) < 2 {
		return maintNothing, nil
	}
	largest, _ := repo.LargestPack(packs)
	age := now.Sub(largest.Created)
	if age > fullAge || !bitmapped && age > grace {
		return maintFull, nil
	}
	roll := repo.PlanGeometric(packs, repo.GeometricFactor)
	switch {
	case roll == nil:
		return maintNothing, nil
	case len(roll) == len(packs):
		return maintFull, nil
	}
	return maintRollUp, roll
}

// jittered spreads the scheduled passes of the nodes of a cluster (and of
// nodes restarted together) over ±25% of the interval; r is uniform in
// [0, 1).
func jittered(interval time.Duration, r float64) time.Duration {
	return time.Duration(float64(interval) * (0.75 + 0.5*r))
}

// Backoff of a job deferred because the node is busy: the wait doubles
// from the first (Config.BusyRetry, default busyRetryFirst) to the last
// and stays there.
const (
	busyRetryFirst = time.Second
	busyRetryMax   = time.Minute
)

// busyBackoff is the wait before the next load check of a deferred job.
func busyBackoff(prev, first time.Duration) time.Duration {
	if prev <= 0 {
		return first
	}
	return min(2*prev, busyRetryMax)
}

// manySessions is the default load signal: more than 4 live sessions per
// CPU.
func (n *Node) manySessions() bool {
	return n.sessions.Load() > int64(4*runtime.GOMAXPROCS(0))
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
	phases map[names.Repo]maintPhase
	jobs   sync.WaitGroup
	idle   chan struct{} // closed while no repository is scheduled
}

type maintMetrics struct {
	deferred  prometheus.Counter
	runs      *prometheus.CounterVec
	rewritten prometheus.Counter
	seconds   prometheus.Histogram
	packs     prometheus.Histogram
}

func newMaintMetrics(reg prometheus.Registerer) *maintMetrics {
	m := &maintMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_repack_runs_total",
			Help: "Background maintenance checks, by result (rolled_up, repacked, nothing, conflict, error)."},
			[]string{"result"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_repack_deferred_total", Help: "Times a background maintenance job waited because the node was busy."}),
		rewritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_repack_bytes_written_total", Help: "Pack bytes written by background roll-ups and full repacks."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_repack_seconds", Help: "Time one background roll-up or full repack took, build and switch.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9)}),
		packs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_repo_packs", Help: "Packs a repository has after each background maintenance check.",
			Buckets: []float64{1, 2, 4, 8, 12, 16, 32, 64, 128, 256}}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.deferred, m.rewritten, m.seconds, m.packs)
	}
	return m
}

func newMaintainer(n *Node, slots int, reg prometheus.Registerer) *maintainer {
	ctx, stop := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &maintainer{node: n, slots: make(chan struct{}, max(slots, 1)), ctx: ctx, stop: stop,
		m: newMaintMetrics(reg), gc: newGCMetrics(reg), phases: map[names.Repo]maintPhase{}, idle: idle}
}

// step applies ev to key's schedule and starts a job when it says so.
func (m *maintainer) step(key names.Repo, ev maintEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil && ev == maintRequested {
		return // shutting down
	}
	p, spawn := maintStep(m.phases[key], ev)
	if p == maintIdle {
		delete(m.phases, key)
		if len(m.phases) == 0 {
			if done := m.node.cfg.MaintenanceDone; done != nil {
				done()
			}
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
func (m *maintainer) job(key names.Repo) {
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
	if !m.waitNotBusy() {
		return
	}
	result, err := m.maintain(key)
	switch {
	case errors.Is(err, repo.ErrConcurrentUpdate):
		// Expected now and then (an admin repack replaced packs the
		// build read); the next push or pass plans again.
		m.node.log.Info("background maintenance raced a change; checking again later", zap.Stringer("repo", key), zap.Error(err))
	case err != nil && !errors.Is(err, context.Canceled):
		m.node.log.Warn("background maintenance failed", zap.Stringer("repo", key), zap.Error(err))
	}
	m.m.runs.WithLabelValues(result).Inc()
}

// waitNotBusy defers a job while the node is busy, re-checking with
// backoff. It reports false if the maintainer shut down meanwhile.
func (m *maintainer) waitNotBusy() bool {
	var wait time.Duration
	for m.node.cfg.Busy() {
		if m.backOff(&wait) != nil {
			return false
		}
	}
	return true
}

// backOff counts a deferred job and sleeps the next wait of its backoff,
// updating *wait; an error means the maintainer shut down meanwhile.
func (m *maintainer) backOff(wait *time.Duration) error {
	m.m.deferred.Inc()
	*wait = busyBackoff(*wait, m.node.cfg.BusyRetry)
	return sleepUntil(m.ctx, time.Now().Add(*wait))
}

// maintain checks key's packs and rolls up the smallest ones, or
// repacks everything, as planMaintenance says. It reports the result
// label. The work waits (without holding the repository) until the node's
// memory budget admits it.
func (m *maintainer) maintain(key names.Repo) (string, error) {
	var wait time.Duration
	for {
		s, kind, roll, err := m.plan(key)
		if err != nil {
			return "error", err
		}
		if kind == maintNothing {
			m.m.packs.Observe(float64(len(s.Snapshot.Packs)))
			s.Release()
			return "nothing", nil
		}
		if release, ok := m.reserve(rewrites(s.Snapshot.Packs, kind, roll)); ok {
			defer release()
			defer s.Release()
			return m.rewrite(s, key, kind, roll)
		}
		s.Release()
		if err := m.backOff(&wait); err != nil {
			return "error", err
		}
	}
}

// reserve admits a job rewriting objects objects against the node's
// memory budget (Config.Reserve).
func (m *maintainer) reserve(objects int64) (func(), bool) {
	if m.node.cfg.Reserve == nil {
		return func() {}, true
	}
	return m.node.cfg.Reserve(objects)
}

// rewrites is how many objects a job of kind reads and writes again.
func rewrites(packs []repo.PackInfo, kind maintKind, roll []string) int64 {
	var n int64
	for _, p := range packs {
		if kind == maintFull || slices.Contains(roll, p.Name) {
			n += int64(p.Objects)
		}
	}
	return n
}

// plan opens a session on key and decides what its packs need. The
// caller releases the session.
func (m *maintainer) plan(key names.Repo) (*RepoSession, maintKind, []string, error) {
	ctx := m.ctx
	s, err := m.node.Session(ctx, key)
	if err != nil {
		return nil, maintNothing, nil, err
	}
	// Whether the largest pack has a bitmap (loaded once per opened pack):
	// layers stand on it. Without a pack cache there are no bitmaps to
	// build.
	bitmapped := m.node.cfg.Deps.Cache == nil || len(s.Snapshot.Packs) < 2
	if !bitmapped {
		largest, _ := repo.LargestPack(s.Snapshot.Packs)
		bm := s.Snapshot.Bitmap(ctx)
		bitmapped = bm != nil && bm.HasBitmap(largest.Name)
	}
	kind, roll := planMaintenance(s.Snapshot.Packs, bitmapped, time.Now(), m.node.cfg.FullRepackAge, m.node.cfg.UnbitmappedGrace)
	return s, kind, roll, nil
}

// rewrite runs the job plan chose on session s.
func (m *maintainer) rewrite(s *RepoSession, key names.Repo, kind maintKind, roll []string) (string, error) {
	ctx := m.ctx
	defer func(start time.Time) { m.m.seconds.Observe(time.Since(start).Seconds()) }(time.Now())
	if m.node.cfg.BeforeRollUp != nil {
		m.node.cfg.BeforeRollUp(key)
	}
	var b *repo.RepackBuild
	var err error
	if kind == maintFull {
		b, err = repo.BuildFullRollUp(ctx, m.node.cfg.Deps, s.Snapshot, nil)
	} else {
		b, err = repo.BuildRollUp(ctx, m.node.cfg.Deps, s.Snapshot, roll, nil)
	}
	if err != nil || b == nil {
		return "error", err
	}
	m.m.rewritten.Add(float64(b.Pack.Size))
	pack, err := m.node.commitRepack(ctx, s, b)
	switch {
	case errors.Is(err, repo.ErrConcurrentUpdate):
		// An admin repack or another node's roll-up replaced some of the
		// packs; the uploaded pack is garbage for GC. The next push or
		// pass plans again.
		return "conflict", err
	case err != nil:
		return "error", err
	}
	after := 1
	if kind == maintRollUp {
		after = len(s.Snapshot.Packs) - len(roll) + 1
	}
	m.m.packs.Observe(float64(after))
	result := map[maintKind]string{maintRollUp: "rolled_up", maintFull: "repacked"}[kind]
	m.node.log.Debug("background maintenance", zap.Stringer("repo", key), zap.String("result", result),
		zap.Int("packs_before", len(s.Snapshot.Packs)), zap.String("into", pack.Name), zap.Int("objects", pack.Objects))
	return result, nil
}

// schedule starts the scheduled pass: every jittered interval, a
// maintenance request for each repository open on the node (merged with
// any already scheduled). Repositories not open here are maintained after
// their next push.
func (m *maintainer) schedule(interval time.Duration) {
	m.every(interval, "scheduled maintenance", func(key names.Repo) bool {
		m.step(key, maintRequested)
		return true
	})
}

// every runs each on every repository open on the node, every jittered
// interval, until shutdown or until each returns false.
func (m *maintainer) every(interval time.Duration, what string, each func(key names.Repo) bool) {
	m.jobs.Add(1)
	go func() {
		defer m.jobs.Done()
		for {
			if sleepUntil(m.ctx, time.Now().Add(jittered(interval, rand.Float64()))) != nil {
				return
			}
			open, err := m.node.listRepos(m.ctx, &listOpen{})
			if err != nil {
				if m.ctx.Err() == nil {
					m.node.log.Warn(what+": list open repositories", zap.Error(err))
				}
				continue
			}
			for _, k := range open {
				if !each(k) {
					return
				}
			}
			if m.node.cfg.AfterMaintenancePass != nil {
				m.node.cfg.AfterMaintenancePass()
			}
		}
	}()
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

// Maintain asks for background maintenance of key (a push added a
// pack): it returns at once; a roll-up runs later if the packs need one.
// Requests for a repository already scheduled are merged.
func (n *Node) Maintain(key names.Repo) {
	if n.cfg.MaintenanceSlots < 0 {
		return
	}
	n.maint.step(key, maintRequested)
}

// WaitMaintenance returns once no background maintenance is scheduled or
// running (tests and benchmarks), or when ctx ends.
func (n *Node) WaitMaintenance(ctx context.Context) error {
	return n.maint.wait(ctx)
}
