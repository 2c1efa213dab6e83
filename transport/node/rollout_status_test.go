package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/product/admin"
)

// TestRolloutStatusAndDashboard: a cluster node (the leader of a
// one-node cluster) reports its traffic state on the peer port's rollout
// status, behind the secret, and exposes every metric the Grafana
// dashboard queries.
func TestRolloutStatusAndDashboard(t *testing.T) {
	const secret = "rollout-status-secret-0123"
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_PEERS=rgit-0=127.0.0.1:1", "RGIT_SELF=rgit-0", "RGIT_PEER_SECRET="+secret)
	base := "http://" + srv.HTTPAddr
	waitServing(t, base+"/ready")

	if code, _ := get(t, "http://"+srv.PeerHTTPAddr+admin.RolloutPath); code != http.StatusUnauthorized {
		t.Errorf("rollout status without the secret: %d, want 401", code)
	}
	srv.CreateRepo(t, "alice/roll")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/roll"), "main")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/roll"), filepath.Join(t.TempDir(), "c"))

	st, err := admin.FetchRollout(context.Background(), srv.PeerHTTPAddr, secret)
	if err != nil {
		t.Fatal(err)
	}
	want := admin.RolloutStatus{State: "serving", Version: st.Version, BootID: st.BootID, OpenRepos: 1, MapAgeMs: 0, LeaderReachable: true}
	if st != want || st.Version == "" || st.BootID == "" {
		b, _ := json.Marshal(st)
		t.Errorf("rollout status %s, want state serving, one open repo, none draining, map age 0, leader reachable, a version and boot id", b)
	}

	// In a cluster the metrics are on the peer HTTP port, without the
	// secret (Prometheus scrapes it); the public port has none.
	if srv.MetricsAddr != srv.PeerHTTPAddr {
		t.Errorf("metrics on %s, want the peer HTTP port %s", srv.MetricsAddr, srv.PeerHTTPAddr)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusNotFound {
		t.Errorf("public /metrics = %d, want 404", code)
	}
	_, metrics := get(t, "http://"+srv.MetricsAddr+"/metrics")
	if !strings.Contains(metrics, `rgit_traffic_state{state="serving"} 1`) {
		t.Errorf("/metrics lacks the serving traffic state:\n%s", grepLines(metrics, "rgit_traffic_state"))
	}
	// deploy TestDashboardMetricsExist checks the dashboard against /metrics.
}

// waitServing polls a /ready URL until it answers 200.
func waitServing(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get(t, url)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %d %q after 20s", url, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
