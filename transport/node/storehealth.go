package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/storage/objstore/guard"
)

// storeMetrics counts the node's object-store requests by operation and
// outcome (guard.Kind), and exports the guard's health state.
type storeMetrics struct{ requests *prometheus.CounterVec }

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rgit_store_requests_total",
		Help: "Object-store requests by operation and result: answered, timeout, refused, throttled, server_error, failed, abandoned (the caller gave up), failed_fast (not sent: the store is down).",
	}, []string{"op", "result"})}
	reg.MustRegister(m.requests)
	return m
}

func (m *storeMetrics) Request(op string, k guard.Kind) {
	m.requests.WithLabelValues(op, k.String()).Inc()
}

// storeStateMetric is rgit_store_state: 1 for the store's health state as
// this node sees it, 0 for the others.
func storeStateMetric(reg prometheus.Registerer, g *guard.Store) {
	for _, st := range guard.States {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "rgit_store_state",
			Help:        "The object store's health as this node sees it: 1 for the current state (healthy, degraded, down).",
			ConstLabels: prometheus.Labels{"state": st.String()},
		}, func() float64 {
			if g.Status().State == st {
				return 1
			}
			return 0
		}))
	}
}

// storeLine is the store's health for /healthz and /ready: "store
// healthy", or the state, since when, and why.
func (s *Server) storeLine() string {
	st := s.guard.Status()
	fault := s.storeFault.Load()
	if st.State == guard.Healthy && fault == nil {
		return "store healthy"
	}
	line := fmt.Sprintf("store %s since %s", st.State, st.Since.UTC().Format(time.RFC3339))
	if st.LastError != "" {
		line += ": " + st.LastError
	}
	if fault != nil {
		line += "; probe: " + *fault
	}
	return line
}

// cacheLine is the pack cache disk's state for /healthz and /ready:
// "cache disk ok", or full and why (packs that do not fit are served from
// the store through memory meanwhile; pushes fail).
func (s *Server) cacheLine() string {
	if err := s.cache.DiskFull(); err != nil {
		return "cache disk full: " + err.Error()
	}
	return "cache disk ok"
}

// storeDown reports whether the store is down or failing its probe.
func (s *Server) storeDown() bool {
	return s.guard.Status().State == guard.Down || s.storeFault.Load() != nil
}

// nodeStatus is GET /status: what a person or a dashboard asks first.
type nodeStatus struct {
	State string      `json:"state"` // traffic state: joining, serving, draining
	Store storeStatus `json:"store"`
	// CacheDisk is "ok" or "full": full while the pack cache's disk has
	// no room for the packs asked for.
	CacheDisk string `json:"cache_disk"`
}

type storeStatus struct {
	State string    `json:"state"` // healthy, degraded, down
	Since time.Time `json:"since"`
	// Probe is "ok" or "failing": the periodic store check.
	Probe string `json:"probe"`
}

// status answers GET /status on the public port. It names states only;
// the reasons (which name the bucket and endpoint) are on /healthz and
// /ready and in the log.
func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	st := s.guard.Status()
	probe := "ok"
	if s.storeFault.Load() != nil {
		probe = "failing"
	}
	state := st.State.String()
	if probe == "failing" && st.State != guard.Down {
		state = guard.Down.String()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	cacheDisk := "ok"
	if s.cache.DiskFull() != nil {
		cacheDisk = "full"
	}
	_ = json.NewEncoder(w).Encode(nodeStatus{State: s.traffic().String(),
		Store: storeStatus{State: state, Since: st.Since.UTC(), Probe: probe}, CacheDisk: cacheDisk})
}
