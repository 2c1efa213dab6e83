package hooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/storage/outbox"
)

// metrics are the node's webhook metrics; none is labelled by repository.
type metrics struct {
	deliveries *prometheus.CounterVec // by outcome: delivered, retry, failed
	attempts   *prometheus.CounterVec // by result: ok, http_error, network_error, timeout
	seconds    prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, depth func() (int, time.Time)) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_hook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered, retry (failed, tried again later) or failed (given up after the retry window)."},
			[]string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_hook_attempts_total",
			Help: "Webhook requests by result: ok (2xx), http_error (another status), timeout, network_error (refused, blocked address, TLS, …)."},
			[]string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_hook_attempt_seconds", Help: "Time of one webhook request, connecting to reading the answer.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 8)}),
	}
	for _, o := range []outbox.Outcome{outbox.Delivered, outbox.Retry, outbox.GaveUp} {
		m.deliveries.WithLabelValues(o.String())
	}
	for _, r := range []string{"ok", "http_error", "timeout", "network_error"} {
		m.attempts.WithLabelValues(r)
	}
	depthGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rgit_hook_outbox_depth",
		Help: "Webhook deliveries waiting in the outboxes of the repositories this node has open."},
		func() float64 { n, _ := depth(); return float64(n) })
	ageGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rgit_hook_oldest_undelivered_seconds",
		Help: "Age of the oldest webhook delivery waiting on this node (0: none)."},
		func() float64 {
			if _, oldest := depth(); !oldest.IsZero() {
				return time.Since(oldest).Seconds()
			}
			return 0
		})
	if reg != nil {
		reg.MustRegister(m.deliveries, m.attempts, m.seconds, depthGauge, ageGauge)
	}
	return m
}

func (m *metrics) outcome(o outbox.Outcome) { m.deliveries.WithLabelValues(o.String()).Inc() }

// attempt counts one request.
func (m *metrics) attempt(a outbox.Attempt) {
	m.seconds.Observe(float64(a.Millis) / 1000)
	r := "network_error"
	switch {
	case a.OK():
		r = "ok"
	case a.Status != 0:
		r = "http_error"
	case len(a.Error) >= 7 && a.Error[:7] == "timeout":
		r = "timeout"
	}
	m.attempts.WithLabelValues(r).Inc()
}
