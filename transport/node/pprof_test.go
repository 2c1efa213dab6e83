package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestPprofBehindPeerSecret checks that the profiling endpoints live on the
// admin listener only, and only for callers holding the peer secret.
func TestPprofBehindPeerSecret(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	get := func(addr, path, secret string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(srv.AdminAddr, "/debug/pprof/", srv.PeerSecret); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index with the secret: %d %.200q", code, body)
	}
	if code, _ := get(srv.AdminAddr, "/debug/pprof/goroutine?debug=1", srv.PeerSecret); code != http.StatusOK {
		t.Errorf("goroutine profile with the secret: %d", code)
	}
	for _, s := range []string{"", "wrong"} {
		if code, _ := get(srv.AdminAddr, "/debug/pprof/goroutine?debug=1", s); code != http.StatusUnauthorized {
			t.Errorf("pprof with secret %q: %d, want 401", s, code)
		}
	}
	if code, _ := get(srv.HTTPAddr, "/debug/pprof/", srv.PeerSecret); code == http.StatusOK {
		t.Errorf("pprof is served on the public HTTP listener")
	}
	// Admin commands still reach the admin server through the new mux.
	srv.CreateRepo(t, "alice/pprof")
}
