package httpmetrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestObserve: an answer is counted under its route and status class,
// the status being the first one written (a body alone is a 200).
func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "x", "route", "test")
	for _, c := range []struct {
		write  func(w http.ResponseWriter)
		status int
	}{
		{func(w http.ResponseWriter) { w.Write([]byte("hi")) }, 200},
		{func(w http.ResponseWriter) { w.WriteHeader(404); w.WriteHeader(500) }, 404},
		{func(w http.ResponseWriter) { w.WriteHeader(304) }, 304},
		{func(http.ResponseWriter) {}, 0},
	} {
		sw := &StatusWriter{ResponseWriter: httptest.NewRecorder()}
		c.write(sw)
		if sw.Status != c.status {
			t.Errorf("status %d, want %d", sw.Status, c.status)
		}
		m.Observe("a", sw.Status, time.Millisecond)
	}
	want := `
# HELP x_requests_total test requests answered, by route and status class (2xx, 3xx, 4xx, 5xx).
# TYPE x_requests_total counter
x_requests_total{code="2xx",route="a"} 2
x_requests_total{code="3xx",route="a"} 1
x_requests_total{code="4xx",route="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "x_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.seconds); n != 1 {
		t.Errorf("%d histograms, want 1", n)
	}
}
