package api

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/transport/frontend/httpmetrics"
)

// frontMetrics are the front handler's: requests by endpoint and status
// class, their duration, and the answer cache's lookups. No label names
// a repository or a caller.
type frontMetrics struct {
	requests *httpmetrics.Requests
	cache    *prometheus.CounterVec
	// hits and misses feed the hit-ratio gauge.
	hits, misses atomic.Int64
}

// Cache lookup results (rgit_api_cache_lookups_total's result).
const (
	cacheHit  = "hit"
	cacheMiss = "miss"
	// cacheBypass: the request was not looked up (a private or
	// unreadable repository, no generation, an archive).
	cacheBypass = "bypass"
)

// badEndpoint labels requests refused before an endpoint was known.
const badEndpoint = "invalid"

func newFrontMetrics(reg prometheus.Registerer) *frontMetrics {
	m := &frontMetrics{
		requests: httpmetrics.New(reg, "rgit_api", "endpoint", "read-API"),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_api_cache_lookups_total",
			Help: "Read-API answer cache lookups: hit, miss, or bypass (not cacheable: private, archive, no generation)."}, []string{"result"}),
	}
	ratio := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rgit_api_cache_hit_ratio",
		Help: "Read-API answer cache hits over hits and misses since the process started (0 before the first lookup)."},
		m.hitRatio)
	if reg != nil {
		reg.MustRegister(m.cache, ratio)
	}
	return m
}

func (m *frontMetrics) hitRatio() float64 {
	h, n := m.hits.Load(), m.hits.Load()+m.misses.Load()
	if n == 0 {
		return 0
	}
	return float64(h) / float64(n)
}

// observe counts one answered request.
func (m *Metrics) observe(ep string, status int, took time.Duration) {
	if m != nil {
		m.front.requests.Observe(ep, status, took)
	}
}

// cacheLookup counts one cache lookup's result.
func (m *Metrics) cacheLookup(result string) {
	if m == nil {
		return
	}
	switch result {
	case cacheHit:
		m.front.hits.Add(1)
	case cacheMiss:
		m.front.misses.Add(1)
	}
	m.front.cache.WithLabelValues(result).Inc()
}
