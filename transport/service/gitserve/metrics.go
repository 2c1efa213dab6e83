package gitserve

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics records one finished request. op is the operation
// ("upload-pack", "receive-pack", "info-refs-upload-pack", …), status the
// transport's outcome label (an HTTP status code, or a Class name over SSH).
type Metrics interface {
	Observe(op, status string, d time.Duration, bytesIn, bytesOut int64)
}

// NopMetrics discards everything.
type NopMetrics struct{}

// Observe implements Metrics.
func (NopMetrics) Observe(string, string, time.Duration, int64, int64) {}

// PromMetrics holds the Prometheus collectors shared by every front end; it
// is registered once and each front end records through For(transport).
type PromMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
}

// NewPromMetrics creates and registers the git front-end collectors:
// rgit_git_requests_total{transport,op,status},
// rgit_git_request_duration_seconds{transport,op},
// rgit_git_bytes_in_total{transport,op}, rgit_git_bytes_out_total{transport,op}.
func NewPromMetrics(reg prometheus.Registerer) (*PromMetrics, error) {
	m := &PromMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_git_requests_total", Help: "Git front-end requests by transport, operation and outcome.",
		}, []string{"transport", "op", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rgit_git_request_duration_seconds",
			Help:    "Git front-end request latency.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9), // 5ms .. ~5.5min
		}, []string{"transport", "op"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_git_bytes_in_total", Help: "Bytes received from git clients.",
		}, []string{"transport", "op"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_git_bytes_out_total", Help: "Bytes sent to git clients.",
		}, []string{"transport", "op"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.bytesIn, m.bytesOut} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register git metrics: %w", err)
		}
	}
	return m, nil
}

// For returns the Metrics of one transport ("http", "ssh").
func (m *PromMetrics) For(transport string) Metrics { return promTransport{m: m, t: transport} }

type promTransport struct {
	m *PromMetrics
	t string
}

func (p promTransport) Observe(op, status string, d time.Duration, in, out int64) {
	p.m.requests.WithLabelValues(p.t, op, status).Inc()
	p.m.duration.WithLabelValues(p.t, op).Observe(d.Seconds())
	p.m.bytesIn.WithLabelValues(p.t, op).Add(float64(in))
	p.m.bytesOut.WithLabelValues(p.t, op).Add(float64(out))
}
