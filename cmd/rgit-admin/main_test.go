package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/admin"
	"github.com/rgit/rgit/transport/peertls"
)

const secret = "0123456789abcdef0123"

// startNode serves the admin endpoint of a single in-memory node.
func startNode(t *testing.T) string {
	t.Helper()
	st := memstore.New()
	d := repo.Deps{Store: st}
	n, err := actors.NewNode(actors.Config{Deps: d, MaintenanceSlots: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	srv := httptest.NewServer(&admin.Server{Node: n, Deps: d, Auth: auth.NewStore(st), Secret: secret,
		Log: zap.NewNop(), Version: "v9.9.9"})
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// admin runs rgit-admin with args against addr and returns its exit status
// and stdout.
func runAdmin(t *testing.T, addr string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"--addr", addr}, args...), &out, &errOut)
	t.Logf("rgit-admin %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
	return code, out.String()
}

// TestJSONOutput: --json prints each listing command's answer as one JSON
// object of a fixed shape.
func TestJSONOutput(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	if code, _ := runAdmin(t, addr, "create-repo", "alice/web"); code != 0 {
		t.Fatalf("create-repo: exit %d", code)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--json", "list-repos"}, `{"repos":["alice/web"]}`},
		{[]string{"--json", "where", "alice/web"}, `{"repo":"alice/web","state":"single-node"}`},
		{[]string{"--json", "status"}, `{"version":"v9.9.9","open_repos":[]}`},
		{[]string{"--json", "set-visibility", "alice/web", "public"}, `{"output":"alice/web is public"}`},
		{[]string{"--json", "delete-repo", "alice/nope"}, `"code":"not_found"}`},
	}
	for _, c := range cases {
		_, out := runAdmin(t, addr, c.args...)
		if !strings.HasSuffix(strings.TrimSpace(out), c.want) || !json.Valid([]byte(out)) {
			t.Errorf("%v: stdout %q, want JSON ending in %s", c.args, out, c.want)
		}
	}
}

// TestExitCodes: scripts tell not found, refused and unreachable apart.
func TestExitCodes(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if code, _ := runAdmin(t, addr, "create-repo", "alice/web"); code != 0 {
		t.Fatalf("create-repo: exit %d", code)
	}
	cases := []struct {
		name string
		addr string
		args []string
		want int
	}{
		{"success", addr, []string{"list-repos"}, 0},
		{"not found", addr, []string{"delete-repo", "alice/nope"}, 1},
		{"usage", addr, []string{"create-repo"}, 2},
		{"exists refused", addr, []string{"create-repo", "alice/web"}, 3},
		{"unreachable", closed, []string{"list-repos"}, 4},
	}
	for _, c := range cases {
		if code, _ := runAdmin(t, c.addr, c.args...); code != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, code, c.want)
		}
	}
	// Help, asked for, is no error and needs no node; none at all is a
	// usage error.
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"--addr", closed}, args...), &out, &errOut); code != 0 ||
			!strings.Contains(out.String()+errOut.String(), "create-repo <owner>/<name>") {
			t.Errorf("%v: exit %d, output %q", args, code, out.String()+errOut.String())
		}
	}
	if code, _ := runAdmin(t, addr); code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	t.Setenv("RGIT_PEER_SECRET", "wrong-secret-wrong-secret")
	if code, _ := runAdmin(t, addr, "list-repos"); code != 3 {
		t.Errorf("bad secret: exit %d, want 3", code)
	}
}

// TestGenPeerCertsAndTLS: gen-peer-certs writes a CA and a certificate,
// and with the RGIT_PEER_TLS_* variables rgit-admin talks to a stream
// port that requires them; without them it cannot.
func TestGenPeerCertsAndTLS(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	dir := t.TempDir()
	if code, _ := runAdmin(t, "unused", "gen-peer-certs", dir); code != 0 {
		t.Fatalf("gen-peer-certs: exit %d", code)
	}
	if code, _ := runAdmin(t, "unused", "gen-peer-certs", dir); code == 0 {
		t.Fatal("gen-peer-certs overwrote existing certificates")
	}
	files := peertls.Files{Cert: filepath.Join(dir, peertls.PeerFile), Key: filepath.Join(dir, peertls.PeerKeyFile),
		CA: filepath.Join(dir, peertls.CAFile)}
	tc, err := peertls.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(&admin.Server{Secret: secret, Log: zap.NewNop(), Version: "v9.9.9"})
	srv.TLS = tc.Server.Clone()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	// A bad visibility is a usage error (2) once the node answers (an
	// unknown command never leaves rgit-admin: it has no message).
	if code, _ := runAdmin(t, addr, "set-visibility", "a/b", "secret"); code == 2 {
		t.Error("rgit-admin without peer TLS was served by a TLS stream port")
	}
	t.Setenv(peertls.EnvCert, files.Cert)
	t.Setenv(peertls.EnvKey, files.Key)
	t.Setenv(peertls.EnvCA, files.CA)
	if code, out := runAdmin(t, addr, "version"); code != 0 || !strings.Contains(out, "node "+addr+": rgit v9.9.9") {
		t.Errorf("version over peer TLS: exit %d, %q", code, out)
	}
	if code, _ := runAdmin(t, addr, "set-visibility", "a/b", "secret"); code != 2 {
		t.Errorf("bad visibility over peer TLS: exit %d, want 2 from the node", code)
	}
	t.Setenv(peertls.EnvCA, "")
	if code, _ := runAdmin(t, addr, "status"); code != 2 {
		t.Errorf("incomplete peer TLS settings: exit %d, want 2", code)
	}
}
