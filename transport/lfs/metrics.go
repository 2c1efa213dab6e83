package lfs

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the node's Git LFS work. No label names a repository or
// a user: their values would grow without bound.
type Metrics struct {
	batches   *prometheus.CounterVec
	objects   *prometheus.CounterVec
	presigned *prometheus.CounterVec
	node      *prometheus.CounterVec
	locks     *prometheus.CounterVec
}

// NewMetrics registers the LFS metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_lfs_batch_requests_total",
			Help: "Git LFS batch requests answered here, by operation (upload, download) and HTTP status."}, []string{"operation", "status"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_lfs_batch_objects_total",
			Help: "Objects of Git LFS batch answers, by operation and outcome (action: a transfer handed out; present: an upload skipped; error)."},
			[]string{"operation", "outcome"}),
		presigned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_lfs_presigned_bytes_total",
			Help: "Bytes of Git LFS objects handed out as presigned store URLs: the store moves them, not the node."}, []string{"operation"}),
		node: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_lfs_node_bytes_total",
			Help: "Bytes of Git LFS objects this node moved itself (node-served transfers, SSH, raw answers, verify reads), by operation."},
			[]string{"operation"}),
		locks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_lfs_lock_requests_total",
			Help: "Git LFS lock requests answered here, by request (create, list, verify, unlock) and HTTP status."}, []string{"request", "status"}),
	}
	for _, c := range []prometheus.Collector{m.batches, m.objects, m.presigned, m.node, m.locks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) batch(op string, status int) {
	if m != nil {
		m.batches.WithLabelValues(op, strconv.Itoa(status)).Inc()
	}
}

func (m *Metrics) object(op, outcome string) {
	if m != nil {
		m.objects.WithLabelValues(op, outcome).Inc()
	}
}

func (m *Metrics) presignedBytes(op string, n int64) {
	if m != nil {
		m.presigned.WithLabelValues(op).Add(float64(n))
	}
}

func (m *Metrics) nodeBytes(op string, n int64) {
	if m != nil && n > 0 {
		m.node.WithLabelValues(op).Add(float64(n))
	}
}

func (m *Metrics) lock(req string, status int) {
	if m != nil {
		m.locks.WithLabelValues(req, strconv.Itoa(status)).Inc()
	}
}
