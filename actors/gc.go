package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// Automatic garbage collection: every GCInterval (jittered, so a fleet
// restarted at once does not list the store in step) the node collects
// each repository it has open, and so owns: the repo actor plans
// (PlanGC, dropping retired entries past their grace), the store half
// (repo.Collect) runs outside the actor. Collections take a maintenance
// slot, so they never run beside a roll-up beyond MaintenanceSlots.

// CollectGarbage runs one garbage collection of key: the database
// half in its repo actor, the store half here. Packs unreferenced for
// less than minAge are kept (a push may be staging them); unfinished
// uploads under the repository older than a day are aborted. When packs were
// deleted, the read API's cached answers of the repository are purged:
// they may show objects that are gone (a deleted branch's commits, which
// the last repack left out). A failed purge is the error, with the
// collection done.
func (n *Node) CollectGarbage(ctx context.Context, key names.Repo, minAge time.Duration) (repo.GCStats, error) {
	now := time.Now()
	plan, err := n.PlanGC(ctx, key, now, minAge)
	if errors.Is(err, repo.ErrNotFound) {
		// Deleted: what is left in the store belongs to nobody.
		plan, err = repo.PlanOrphanGC(ctx, n.cfg.Deps, key, now, minAge)
	}
	if err != nil {
		return repo.GCStats{}, err
	}
	st, err := repo.Collect(ctx, n.cfg.Deps, plan)
	if st.DeletedPacks > 0 && n.cfg.Cache != nil {
		if perr := n.cfg.Cache.Purge(ctx, key); perr != nil {
			err = errors.Join(err, fmt.Errorf("gc %s deleted %d packs, but %w", key, st.DeletedPacks, perr))
		}
	}
	return st, err
}

type gcMetrics struct {
	runs    *prometheus.CounterVec
	deleted prometheus.Counter
	aborted prometheus.Counter
}

func newGCMetrics(reg prometheus.Registerer) *gcMetrics {
	m := &gcMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_gc_runs_total",
			Help: "Automatic garbage collections of owned repositories, by result (ok, error)."}, []string{"result"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_gc_deleted_bytes_total", Help: "Pack bytes deleted by automatic garbage collection."}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_gc_aborted_uploads_total",
			Help: "Unfinished uploads (S3 multipart uploads of nodes killed mid-write) aborted by automatic garbage collection."}),
	}
	for _, r := range []string{"ok", "error"} {
		m.runs.WithLabelValues(r) // exported as 0 before the first run
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.deleted, m.aborted)
	}
	return m
}

// startGC starts the collection pass if GCInterval asks for one; the
// node's supervisor must exist.
func (m *maintainer) startGC() {
	if interval, minAge := m.node.cfg.GCInterval, m.node.cfg.GCMinAge; interval > 0 {
		m.every(interval, "automatic gc", func(key names.Repo) bool { return m.collect(key, minAge) })
	}
}

// collect runs one collection of key in a maintenance slot; false when
// the node is shutting down.
func (m *maintainer) collect(key names.Repo, minAge time.Duration) bool {
	select {
	case m.slots <- struct{}{}:
	case <-m.ctx.Done():
		return false
	}
	defer func() { <-m.slots }()
	st, err := m.node.CollectGarbage(m.ctx, key, minAge)
	switch {
	case m.ctx.Err() != nil:
		return false
	case err != nil && !errors.Is(err, repo.ErrNotFound):
		m.gc.runs.WithLabelValues("error").Inc()
		m.node.log.Warn("automatic gc failed", zap.Stringer("repo", key), zap.Error(err))
	case err == nil:
		m.gc.runs.WithLabelValues("ok").Inc()
		m.gc.deleted.Add(float64(st.DeletedBytes))
		m.gc.aborted.Add(float64(st.AbortedUploads))
		if st.DeletedKeys > 0 || st.Retired > 0 || st.AbortedUploads > 0 {
			m.node.log.Info("automatic gc", zap.Stringer("repo", key), zap.Int("deleted_objects", st.DeletedKeys),
				zap.Int64("deleted_bytes", st.DeletedBytes), zap.Int("retired_dropped", st.Retired),
				zap.Int("aborted_uploads", st.AbortedUploads))
		}
	}
	return true
}
