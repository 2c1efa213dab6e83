package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/repo"
)

// Automatic garbage collection: every GCInterval (jittered, so a fleet
// restarted at once does not list the store in step) the node collects
// each repository it has open, and so owns: the repo actor plans
// (PlanGC, dropping retired entries past their grace), the store half
// (repo.Collect) runs outside the actor. Collections take a maintenance
// slot, so they never run beside a roll-up beyond MaintenanceSlots.

// gcDelay is the wait before the next collection round: interval scaled
// by a factor in [0.75, 1.25) drawn from u in [0, 1).
func gcDelay(interval time.Duration, u float64) time.Duration {
	return time.Duration(float64(interval) * (0.75 + u/2))
}

// CollectGarbage runs one garbage collection of owner/name: the database
// half in its repo actor, the store half here. Packs unreferenced for
// less than minAge are kept (a push may be staging them).
func (n *Node) CollectGarbage(ctx context.Context, owner, name string, minAge time.Duration) (repo.GCStats, error) {
	plan, err := n.PlanGC(ctx, owner, name, time.Now(), minAge)
	if err != nil {
		return repo.GCStats{}, err
	}
	return repo.Collect(ctx, n.cfg.Deps, plan)
}

type gcMetrics struct {
	runs    *prometheus.CounterVec
	deleted prometheus.Counter
}

func newGCMetrics(reg prometheus.Registerer) *gcMetrics {
	m := &gcMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_gc_runs_total",
			Help: "Automatic garbage collections of owned repositories, by result (ok, error)."}, []string{"result"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_gc_deleted_bytes_total", Help: "Pack bytes deleted by automatic garbage collection."}),
	}
	for _, r := range []string{"ok", "error"} {
		m.runs.WithLabelValues(r) // exported as 0 before the first run
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.deleted)
	}
	return m
}

// startGC starts the collection loop if GCInterval asks for one; the
// node's supervisor must exist.
func (m *maintainer) startGC() {
	if m.node.cfg.GCInterval > 0 {
		m.jobs.Add(1)
		go m.gcLoop(m.node.cfg.GCInterval, m.node.cfg.GCMinAge)
	}
}

// gcLoop collects the open repositories every gcDelay until shutdown.
func (m *maintainer) gcLoop(interval, minAge time.Duration) {
	defer m.jobs.Done()
	for {
		t := time.NewTimer(gcDelay(interval, rand.Float64()))
		select {
		case <-m.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		open, err := m.node.OpenRepos(m.ctx)
		if err != nil {
			if m.ctx.Err() == nil {
				m.node.log.Warn("automatic gc: cannot list open repositories", zap.Error(err))
			}
			continue
		}
		for _, key := range open {
			if !m.collect(repoKey(key), minAge) {
				return
			}
		}
	}
}

// collect runs one collection of key in a maintenance slot; false when
// the node is shutting down.
func (m *maintainer) collect(key repoKey, minAge time.Duration) bool {
	select {
	case m.slots <- struct{}{}:
	case <-m.ctx.Done():
		return false
	}
	defer func() { <-m.slots }()
	owner, name := key.split()
	st, err := m.node.CollectGarbage(m.ctx, owner, name, minAge)
	switch {
	case m.ctx.Err() != nil:
		return false
	case err != nil && !errors.Is(err, repo.ErrNotFound):
		m.gc.runs.WithLabelValues("error").Inc()
		m.node.log.Warn("automatic gc failed", zap.String("repo", string(key)), zap.Error(err))
	case err == nil:
		m.gc.runs.WithLabelValues("ok").Inc()
		m.gc.deleted.Add(float64(st.DeletedBytes))
		if st.DeletedKeys > 0 || st.Retired > 0 {
			m.node.log.Info("automatic gc", zap.String("repo", string(key)), zap.Int("deleted_objects", st.DeletedKeys),
				zap.Int64("deleted_bytes", st.DeletedBytes), zap.Int("retired_dropped", st.Retired))
		}
	}
	return true
}
