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
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/wire/peertls"
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
		Log: zap.NewNop(), Version: "v9.9.9", Rollout: func(context.Context) (admin.RolloutStatus, error) {
			return admin.RolloutStatus{State: "serving", Version: "v9.9.9", BootID: "boot-1", MapAgeMs: -1}, nil
		}})
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
		{[]string{"--json", "where", "alice/web"}, `{"repo":"alice/web","state":"single-node","view_age_ms":-1}`},
		{[]string{"--json", "status"}, `{"version":"v9.9.9","open_repos":[],"mode":"single-node","map_age_ms":-1}`},
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

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// runAll is runAdmin returning stderr too.
func runAll(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"--addr", addr}, args...), &out, &errOut)
	t.Logf("rgit-admin %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// TestNotFoundIsNotFound: where, list-tokens and list-keys of something
// that does not exist say so, with exit status 1, not an answer that
// reads like one.
func TestNotFoundIsNotFound(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"where", "alice/nope"}, "alice/nope: repository not found"},
		{[]string{"list-tokens", "nobody"}, "nobody is not a user (no token, key or repository was ever made for it)"},
		{[]string{"list-keys", "nobody"}, "nobody is not a user"},
	}
	for _, c := range cases {
		if code, out, errOut := runAll(t, addr, c.args...); code != admin.ExitNotFound || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
	// A user with nothing to list is still a user: an empty table.
	runAll(t, addr, "create-repo", "bob/web")
	if code, out, _ := runAll(t, addr, "list-tokens", "Bob"); code != 0 || !strings.HasPrefix(out, "ID ") {
		t.Errorf("list-tokens of a user without tokens: exit %d, %q", code, out)
	}
	if code, out, _ := runAll(t, addr, "where", "bob/web"); code != 0 || !strings.Contains(out, "bob/web is served by this node") {
		t.Errorf("where of an existing repository: exit %d, %q", code, out)
	}
}

// TestGrantNeedsAUser: granting to a name nothing was ever made for is
// refused (a typo must not become a collaborator) unless --new-user,
// which says that it made one.
func TestGrantNeedsAUser(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	runAll(t, addr, "create-repo", "alice/demo")
	code, out, errOut := runAll(t, addr, "grant", "alice/demo", "carol", "read")
	if code != admin.ExitNotFound || out != "" ||
		!strings.Contains(errOut, "carol is not a user (no token, key or repository was ever made for it); check the spelling, or grant with --new-user") {
		t.Fatalf("grant to a non-user: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, out, _ := runAll(t, addr, "list-access", "alice/demo"); strings.Contains(out, "carol") {
		t.Fatalf("refused grant changed the collaborators:\n%s", out)
	}
	code, out, _ = runAll(t, addr, "grant", "alice/demo", "carol", "read", "--new-user")
	if code != 0 || out != "carol has read on alice/demo (carol is a new user: it has no token or key yet; add-token or add-key gives it one)\n" {
		t.Fatalf("grant --new-user: exit %d, %q", code, out)
	}
	// carol is a user now; so is anyone with a token.
	runAll(t, addr, "add-token", "dave")
	for _, u := range []string{"carol", "Dave"} {
		if code, out, _ := runAll(t, addr, "grant", "alice/demo", u, "write"); code != 0 || strings.Contains(out, "new user") {
			t.Errorf("grant to user %s: exit %d, %q", u, code, out)
		}
	}
}

// TestCreateRepoSaysWhatItCreated: a .git suffix is not part of a name;
// create-repo says it was dropped.
func TestCreateRepoSaysWhatItCreated(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	code, out, _ := runAll(t, addr, "create-repo", "alice/x.git")
	if code != 0 || out != "created alice/x (without \".git\": repository names never end in .git; clone URLs may add it)\n" {
		t.Fatalf("create-repo alice/x.git: exit %d, %q", code, out)
	}
	if code, out, _ := runAll(t, addr, "create-repo", "alice/y"); code != 0 || out != "created alice/y\n" {
		t.Fatalf("create-repo alice/y: exit %d, %q", code, out)
	}
}

// TestProtectWithoutFlags: the flags are optional, as the usage says; a
// pattern alone protects against both force-pushes and deletes.
func TestProtectWithoutFlags(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	addr := startNode(t)
	runAll(t, addr, "create-repo", "alice/web")
	if code, out, _ := runAll(t, addr, "protect", "alice/web", "refs/heads/main"); code != 0 ||
		out != "refs/heads/main protected on alice/web: no-force-push no-delete\n" {
		t.Fatalf("protect without flags: exit %d, %q", code, out)
	}
	if code, out, _ := runAll(t, addr, "protect", "alice/web", "refs/heads/dev", "--no-delete"); code != 0 ||
		out != "refs/heads/dev protected on alice/web: no-delete\n" {
		t.Fatalf("protect --no-delete: exit %d, %q", code, out)
	}
}

// TestCommandHelp: every command's --help (and help <command>) prints its
// usage and what it does on stdout, exit 0, without asking a node; help
// describes every command in one line.
func TestCommandHelp(t *testing.T) {
	addr := closedAddr(t)
	code, help, _ := runAll(t, addr, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	var commands []string
	for i, l := range lines {
		cmd, isCommand := strings.CutPrefix(l, "  ")
		if !isCommand || strings.HasPrefix(cmd, " ") {
			continue
		}
		name, _, _ := strings.Cut(cmd, " ")
		commands = append(commands, name)
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "      ") || len(strings.TrimSpace(lines[i+1])) < 10 {
			t.Errorf("help: %s has no description line", name)
		}
	}
	if len(commands) < 28 {
		t.Fatalf("help lists %d commands:\n%s", len(commands), help)
	}
	for _, name := range commands {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			code, out, errOut := runAll(t, addr, args...)
			if code != 0 || !strings.HasPrefix(out, "usage: rgit-admin "+name) || strings.Count(out, "\n") < 3 || errOut != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	}
	if code, _, errOut := runAll(t, addr, "help", "frobnicate"); code != admin.ExitUsage || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, %q", code, errOut)
	}
}

// TestRolloutStatusUsesAdminAddr: rollout-status asks the node at
// RGIT_ADMIN_ADDR, like every other command.
func TestRolloutStatusUsesAdminAddr(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	t.Setenv("RGIT_ADMIN_ADDR", startNode(t))
	t.Setenv("RGIT_PEER_ADDR", closedAddr(t))
	var out, errOut bytes.Buffer
	code := run([]string{"rollout-status"}, &out, &errOut)
	var st admin.RolloutStatus
	if code != 0 || json.Unmarshal(out.Bytes(), &st) != nil || st.State != "serving" || st.BootID != "boot-1" {
		t.Fatalf("rollout-status: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestVersionWithoutNode: version prints rgit-admin's own version and,
// when no node answers, fails like any command that cannot reach its node.
func TestVersionWithoutNode(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	code, out, errOut := runAll(t, closedAddr(t), "version")
	if code != admin.ExitUnreachable || !strings.HasPrefix(out, "rgit-admin ") || !strings.Contains(errOut, "no node version") {
		t.Fatalf("version without a node: exit %d, stdout %q, stderr %q; want exit 4", code, out, errOut)
	}
	if code, out, _ := runAll(t, startNode(t), "version"); code != 0 || !strings.Contains(out, ": rgit v9.9.9") {
		t.Fatalf("version with a node: exit %d, %q", code, out)
	}
}

// TestStatusSingleNode: status says the node is a single node.
func TestStatusSingleNode(t *testing.T) {
	t.Setenv("RGIT_PEER_SECRET", secret)
	code, out, _ := runAll(t, startNode(t), "status")
	if code != 0 || out != "version: v9.9.9\nnode: single node (no cluster)\nopen repositories: 0\n" {
		t.Fatalf("status: exit %d, %q", code, out)
	}
}
