package node_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthReadyMetrics checks the operational endpoints a push leaves
// their marks on: /healthz counts the open repository, /ready says serving,
// and /metrics (on the internal port) carries the request, byte,
// open-repo, refdb commit latency and pack cache series.
func TestHealthReadyMetrics(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	srv.CreateRepo(t, "alice/ops")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/ops"), "main")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/ops"), filepath.Join(t.TempDir(), "c"))

	base := "http://" + srv.HTTPAddr
	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, "open_repos 1") {
		t.Errorf("/healthz = %d %q, want 200 with open_repos 1", code, body)
	}
	if code, body := get(t, base+"/ready"); code != 200 || !strings.Contains(body, "serving") {
		t.Errorf("/ready = %d %q", code, body)
	}
	code, body := get(t, "http://"+srv.MetricsAddr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, series := range []string{
		`rgit_git_requests_total{`,
		`rgit_git_request_duration_seconds_bucket{`,
		`rgit_git_bytes_in_total{`,
		`rgit_git_bytes_out_total{`,
		`rgit_open_repos 1`,
		`rgit_refdb_commit_seconds_count{result="ok"}`,
		`rgit_pack_cache_hits_total`,
		// Every session ended: the session actors are gone.
		`rgit_git_sessions{kind="http"} 0`,
		`rgit_git_sessions{kind="ssh"} 0`,
	} {
		if !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// TestMetricsNotPublic: /metrics, which names the build, is not on the
// public port: a single node serves it on its admin port (loopback), or
// on RGIT_METRICS_ADDR's listener when that is set.
func TestMetricsNotPublic(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars []string
	}{
		{"default", nil},
		{"RGIT_METRICS_ADDR", []string{"RGIT_METRICS_ADDR=127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := gitenv.StartServer(t, gitenv.FileStore(t), tc.vars...)
			if code, body := get(t, "http://"+srv.HTTPAddr+"/metrics"); code != http.StatusNotFound || strings.Contains(body, "rgit_build_info") {
				t.Errorf("public /metrics = %d, build info shown: %v", code, strings.Contains(body, "rgit_build_info"))
			}
			if tc.vars == nil && srv.MetricsAddr != srv.AdminAddr {
				t.Errorf("metrics on %s, want the admin port %s", srv.MetricsAddr, srv.AdminAddr)
			}
			if tc.vars != nil && (srv.MetricsAddr == srv.AdminAddr || srv.MetricsAddr == srv.HTTPAddr) {
				t.Errorf("metrics on %s, want a listener of its own", srv.MetricsAddr)
			}
			if code, body := get(t, "http://"+srv.MetricsAddr+"/metrics"); code != 200 || !strings.Contains(body, "rgit_build_info{") {
				t.Errorf("internal /metrics = %d, build info: %v", code, strings.Contains(body, "rgit_build_info{"))
			}
		})
	}
}
