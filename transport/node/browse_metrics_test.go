package node_test

import (
	"slices"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/redistest"
)

// metricDelta reads series on the /metrics at addr before and after do.
func metricDelta(t *testing.T, addr string, do func(), series ...string) []float64 {
	t.Helper()
	before := make([]float64, len(series))
	for i, s := range series {
		before[i], _ = gitenv.Metric(t, addr, s)
	}
	do()
	out := make([]float64, len(series))
	for i, s := range series {
		v, _ := gitenv.Metric(t, addr, s)
		out[i] = v - before[i]
	}
	return out
}

// TestBrowseMetricsMove: on a single node with the Redis cache, read-API
// requests are counted by endpoint and status class with their time, the
// cache's misses and hits (and the ratio they make), and web pages by
// view and status class; on api-serve, the same on RGIT_METRICS_ADDR.
func TestBrowseMetricsMove(t *testing.T) {
	rs := redistest.Start(t, "maxmemory-policy volatile-lru")
	env := gitenv.New(t)
	store := gitenv.FileStore(t)
	srv := gitenv.StartServer(t, store, "RGIT_REDIS_URL="+rs.URL())
	srv.CreateRepo(t, "alice/pub")
	srv.Admin(t, "set-visibility", "alice/pub", "public")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	tip := env.Commit(t, work, "one", map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/pub"), "main")
	base := "http://" + srv.HTTPAddr

	got := metricDelta(t, srv.MetricsAddr, func() {
		for range 2 {
			if code, body := get(t, base+"/api/alice/pub/tree/"+tip); code != 200 {
				t.Fatalf("tree: %d %s", code, body)
			}
		}
		if code, _ := get(t, base+"/api/alice/pub/nope"); code != 400 {
			t.Fatalf("unknown endpoint: %d", code)
		}
	}, `rgit_api_requests_total{code="2xx",endpoint="tree"}`, `rgit_api_request_seconds_count{endpoint="tree"}`,
		`rgit_api_requests_total{code="4xx",endpoint="invalid"}`,
		`rgit_api_cache_lookups_total{result="miss"}`, `rgit_api_cache_lookups_total{result="hit"}`)
	if want := []float64{2, 2, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("two tree answers and a bad path moved the API metrics by %v, want %v", got, want)
	}
	hits, _ := gitenv.Metric(t, srv.MetricsAddr, `rgit_api_cache_lookups_total{result="hit"}`)
	misses, _ := gitenv.Metric(t, srv.MetricsAddr, `rgit_api_cache_lookups_total{result="miss"}`)
	if ratio, ok := gitenv.Metric(t, srv.MetricsAddr, "rgit_api_cache_hit_ratio"); !ok || ratio != hits/(hits+misses) {
		t.Errorf("hit ratio %v (present %v), want %v/(%v+%v)", ratio, ok, hits, hits, misses)
	}

	got = metricDelta(t, srv.MetricsAddr, func() {
		if code, body := get(t, base+"/alice/pub/tree/"+tip+"/d"); code != 200 {
			t.Fatalf("tree page: %d %s", code, body)
		}
		if code, _ := get(t, base+"/alice/nope"); code != 404 {
			t.Fatalf("missing repository page: %d", code)
		}
	}, `rgit_web_requests_total{code="2xx",view="tree"}`, `rgit_web_request_seconds_count{view="tree"}`,
		`rgit_web_requests_total{code="4xx",view="repo"}`, `rgit_api_requests_total{code="2xx",endpoint="lastcommit"}`)
	if want := []float64{1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("a tree page and a missing repository moved the web metrics by %v, want %v", got, want)
	}

	// api-serve in front of a cluster node of the same store.
	const secret = "browse-metrics-secret-0123456"
	cl := gitenv.StartServer(t, store, "RGIT_PEERS=rgit-0=127.0.0.1:1", "RGIT_SELF=rgit-0", "RGIT_PEER_SECRET="+secret)
	waitServing(t, "http://"+cl.HTTPAddr+"/ready")
	api := startAPI(t, store, "http://"+cl.PeerHTTPAddr, secret, map[string]string{"RGIT_METRICS_ADDR": "127.0.0.1:0"})
	got = metricDelta(t, api.MetricsAddr, func() {
		if code, body := get(t, "http://"+api.Addr+"/api/alice/pub/refs"); code != 200 {
			t.Fatalf("api-serve refs: %d %s", code, body)
		}
		if code, body := get(t, "http://"+api.Addr+"/alice/pub"); code != 200 {
			t.Fatalf("api-serve page: %d %s", code, body)
		}
	}, `rgit_api_requests_total{code="2xx",endpoint="refs"}`, `rgit_web_requests_total{code="2xx",view="repo"}`)
	if want := []float64{2, 1}; !slices.Equal(got, want) { // the page reads refs too
		t.Errorf("api-serve: refs and a page moved its metrics by %v, want %v", got, want)
	}
	if code, _ := get(t, "http://"+api.Addr+"/metrics"); code == 200 {
		t.Errorf("api-serve answers /metrics on its public port")
	}
}
