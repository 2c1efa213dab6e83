// Package httpmetrics counts HTTP answers for Prometheus: requests by a
// route label (an endpoint, a view) and status class, and their
// duration, with the writer that records an answer's status. The label's
// values must come from a fixed set (routes), never from a repository or
// a caller. It imports Prometheus and the standard library only.
package httpmetrics

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Requests is one surface's request counter and duration histogram:
// {name}_requests_total{label, code} and {name}_request_seconds{label}.
type Requests struct {
	total   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// buckets span a cached answer (a millisecond) to a slow diff or walk.
var buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New registers the metrics of one surface on reg (nil: none): name is
// the prefix ("rgit_api"), label the route label ("endpoint"), what the
// surface as the help texts name it ("read-API").
func New(reg prometheus.Registerer, name, label, what string) *Requests {
	m := &Requests{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_requests_total",
			Help: what + " requests answered, by " + label + " and status class (2xx, 3xx, 4xx, 5xx)."}, []string{label, "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name + "_request_seconds",
			Help: "Time to answer a " + what + " request, to its last byte, by " + label + ".", Buckets: buckets}, []string{label}),
	}
	if reg != nil {
		reg.MustRegister(m.total, m.seconds)
	}
	return m
}

// Observe counts one answer of route with status (0: 200), which took
// took. A nil Requests counts nothing.
func (m *Requests) Observe(route string, status int, took time.Duration) {
	if m == nil {
		return
	}
	m.total.WithLabelValues(route, Class(status)).Inc()
	m.seconds.WithLabelValues(route).Observe(took.Seconds())
}

// Class is the status class: "2xx" for 200..299 and so on; 0 (no status
// written) is a 200, as net/http sends it.
func Class(status int) string {
	if status == 0 {
		status = http.StatusOK
	}
	return strconv.Itoa(status/100) + "xx"
}

// StatusWriter records the status of an answer once it starts.
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

func (s *StatusWriter) WriteHeader(code int) {
	if code >= 200 && s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusWriter) Write(p []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// ReadFrom passes io.Copy on to the writer's own ReadFrom, which sends a
// file with sendfile(2) (objstore.Send's Git LFS objects).
func (s *StatusWriter) ReadFrom(r io.Reader) (int64, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{s.ResponseWriter}, r)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
