package deploy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
	Templating struct {
		List []struct{ Query any }
	}
}

var metricName = regexp.MustCompile(`\b(?:rgit|process|go)_[a-zA-Z0-9_]+\b`)

// scrape returns the sample names a node exports and the label names of
// each, after a push and a clone (so the request series exist).
func scrape(t *testing.T) map[string][]string {
	t.Helper()
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	srv.CreateRepo(t, "alice/dash")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/dash"), "main")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/dash"), filepath.Join(t.TempDir(), "c"))
	resp, err := http.Get("http://" + srv.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	samples := map[string][]string{}
	for _, l := range strings.Split(string(body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, rest, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		for _, m := range labelName.FindAllStringSubmatch(rest, -1) {
			if !slices.Contains(samples[name], m[1]) {
				samples[name] = append(samples[name], m[1])
			}
		}
		if _, ok := samples[name]; !ok {
			samples[name] = nil
		}
	}
	return samples
}

// TestDashboardMetricsExist: every metric the Grafana dashboard queries
// is one a node exports, and no rgit series is labelled by repository or
// user (their values grow without bound).
func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var queried []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			queried = append(queried, metricName.FindAllString(tg.Expr, -1)...)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			queried = append(queried, metricName.FindAllString(q, -1)...)
		}
	}
	samples := scrape(t)
	slices.Sort(queried)
	for _, name := range slices.Compact(queried) {
		if _, ok := samples[name]; !ok {
			t.Errorf("the dashboard queries %s, which /metrics does not export", name)
		}
	}
	for _, name := range []string{"rgit_admission_refusals_total", "rgit_gc_runs_total"} {
		if !slices.Contains(queried, name) {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
	for name, labels := range samples {
		for _, l := range labels {
			if strings.HasPrefix(name, "rgit_") && slices.Contains([]string{"repo", "repository", "owner", "name", "user", "token", "key"}, l) {
				t.Errorf("%s has label %q, whose values grow with repositories or users", name, l)
			}
		}
	}
}
