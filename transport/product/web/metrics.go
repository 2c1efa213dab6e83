package web

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/transport/frontend/httpmetrics"
)

// Metrics are the page's requests by view and status class, and their
// duration. No label names a repository or a caller.
type Metrics struct{ requests *httpmetrics.Requests }

// NewMetrics registers the page's metrics on reg (nil: none):
// rgit_web_requests_total{view,code} and rgit_web_request_seconds{view}.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{requests: httpmetrics.New(reg, "rgit_web", "view", "web page")}
}

// viewOf names the view a route pattern serves (the pattern the page's
// mux matched, r.Pattern): the word after /{owner}/{name}/ for a
// repository's views, "repo" for its front page, the word after /-/ for
// the page's own, "index" for the list; "other" for the not-found
// catch-all and anything unmatched. Its values are the routes', so the
// label stays as small as the route table.
func viewOf(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p // "GET /…"
	}
	segs := strings.Split(strings.Trim(pattern, "/"), "/")
	switch {
	case pattern == "/{$}":
		return "index"
	case segs[0] == "-" && len(segs) > 1:
		return segs[1]
	case len(segs) == 2 && isWildcard(segs[0]) && isWildcard(segs[1]):
		return "repo"
	case len(segs) > 2 && isWildcard(segs[0]) && isWildcard(segs[1]) && !isWildcard(segs[2]):
		return segs[2]
	}
	return "other"
}

func isWildcard(seg string) bool { return strings.HasPrefix(seg, "{") }

func (m *Metrics) observe(view string, status int, took time.Duration) {
	if m != nil {
		m.requests.Observe(view, status, took)
	}
}
