package node_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node/version"
)

// TestBuildInfo: a node says which build it runs, in /metrics
// (rgit_build_info, constant 1) and in rgit-admin status and version, so
// a mixed fleet during a rollout is visible.
func TestBuildInfo(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	b := version.Get()
	_, metrics := get(t, "http://"+srv.MetricsAddr+"/metrics")
	series := fmt.Sprintf(`rgit_build_info{commit=%q,go_version=%q,version=%q} 1`, b.Commit, b.GoVersion, b.Version)
	if !strings.Contains(metrics, series) {
		t.Errorf("/metrics lacks %s", series)
	}
	if status := srv.Admin(t, "status"); !strings.Contains(status, "version: "+b.String()+"\n") {
		t.Errorf("status does not show the version:\n%s", status)
	}
	if v := srv.Admin(t, "version"); v != b.String() {
		t.Errorf("version = %q, want %q", v, b.String())
	}
}
