package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

func newTestServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	const secret = "0123456789abcdef0123"
	srv := httptest.NewServer(&Server{Secret: secret, Log: zap.NewNop()})
	t.Cleanup(srv.Close)
	return srv, secret
}

// call runs a command line against srv as rgit-admin does: Parse, then
// the message.
func call(t *testing.T, srv *httptest.Server, secret, command string, args ...string) (string, error) {
	t.Helper()
	m, err := Parse(command, args)
	if err != nil {
		return "", err
	}
	var out, progress bytes.Buffer
	addr := strings.TrimPrefix(srv.URL, "http://")
	err = Call(context.Background(), addr, secret, m, &progress, &out)
	return out.String(), err
}

func TestRejectsBadSecret(t *testing.T) {
	srv, secret := newTestServer(t)
	for _, s := range []string{"", "wrong", secret + "x", secret[:len(secret)-1]} {
		_, err := call(t, srv, s, "status")
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("secret %q: err = %v, want 401", s, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	srv, secret := newTestServer(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"create-repo"}, "usage: create-repo <owner>/<name>"},
		{[]string{"fork", "a/b"}, "usage: fork"},
		{[]string{"create-repo", "nameonly"}, "is not <owner>/<name>"},
		{[]string{"create-repo", "a/../b"}, "invalid"},
		{[]string{"set-visibility", "a/b", "secret"}, "public or private"},
		{[]string{"add-token", "api"}, "reserved"},
		{[]string{"add-token", "Api"}, "reserved"},
		{[]string{"create-repo", "API/x"}, "reserved"},
		{[]string{"create-repo", "Api/x"}, "reserved"},
		{[]string{"create-repo", "a/x.git.git"}, "invalid"},
		{[]string{"grant", "a/b", "c"}, "usage: grant"},
		{[]string{"grant", "a/b", "c", "read", "--as"}, "--as needs a value"},
		{[]string{"protect", "a/b", "refs/heads/x", "--bogus"}, "unknown flag --bogus"},
		{[]string{"protect", "a/b", "refs/heads/x", "--no-delete=yes"}, "takes no value"},
		{[]string{"add-token", "alice", "--expires", "soon"}, "--expires"},
		{[]string{"add-token", "alice", "--expires", "-3d"}, "--expires"},
		{[]string{"add-token", "alice", "--scope", "admin"}, "scope must be read or write"},
		{[]string{"revoke-token", "alice", "not-an-id"}, "no such token"},
		{[]string{"list-keys"}, "usage: list-keys"},
	}
	for _, c := range cases {
		_, err := call(t, srv, secret, c.args[0], c.args[1:]...)
		if !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func TestUsageListsEveryCommand(t *testing.T) {
	u := strings.Join(Usage(), "\n")
	for name := range commands {
		if !strings.Contains(u, name) {
			t.Errorf("usage lacks %s", name)
		}
	}
}

// TestVersion: the version command answers the node's build, so
// rgit-admin can show it next to its own.
func TestVersion(t *testing.T) {
	const secret = "0123456789abcdef0123"
	srv := httptest.NewServer(&Server{Secret: secret, Log: zap.NewNop(), Version: "v1.2.0 (commit abc, 2025-01-02T03:04:05Z, go1.26.0)"})
	t.Cleanup(srv.Close)
	out, err := call(t, srv, secret, "version")
	if err != nil || out != "v1.2.0 (commit abc, 2025-01-02T03:04:05Z, go1.26.0)\n" {
		t.Errorf("version = %q, %v", out, err)
	}
}

func TestParseFlags(t *testing.T) {
	spec := map[string]bool{"repo": true, "write": false}
	pos, flags, err := parseFlags([]string{"--repo", "a/b", "x", "--write", "--repo=c/d", "--", "--not-a-flag"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pos, " ") != "x --not-a-flag" || strings.Join(flags["repo"], " ") != "a/b c/d" || len(flags["write"]) != 1 {
		t.Fatalf("pos %q flags %q", pos, flags)
	}
	if _, _, err := parseFlags([]string{"--repo"}, spec); !errors.Is(err, ErrUsage) {
		t.Fatalf("missing value: %v", err)
	}
	// Commands without flags keep arguments that merely look like flags
	// out of reach: they are refused, not silently taken as names.
	if _, _, err := parseFlags([]string{"--x"}, nil); !errors.Is(err, ErrUsage) {
		t.Fatalf("unknown flag: %v", err)
	}
}

// TestTypedResults: listing and changing credentials answer a typed value
// (what --json prints), beside the text.
func TestTypedResults(t *testing.T) {
	const secret = "0123456789abcdef0123"
	srv := httptest.NewServer(&Server{Secret: secret, Log: zap.NewNop(), Auth: auth.NewStore(memstore.New())})
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	r, err := Do(t.Context(), addr, nil, secret, AddToken{Owner: "alice", Scope: "read", Name: "ci", Expires: "30d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	issued, ok := r.(*Message)
	if !ok || issued.Token == nil || issued.Secret != r.Text() || issued.Token.Scope != auth.ScopeRead {
		t.Fatalf("add-token reply %#v", r)
	}
	if r, err = Do(t.Context(), addr, nil, secret, ListTokens{Owner: "alice"}, nil); err != nil {
		t.Fatal(err)
	}
	list, ok := r.(*TokenList)
	data, _ := json.Marshal(r)
	if !ok || len(list.Tokens) != 1 || list.Tokens[0].ID != issued.Token.ID ||
		list.Tokens[0].Name != "ci" || list.Tokens[0].Expires.IsZero() || strings.Contains(string(data), issued.Secret) {
		t.Fatalf("list-tokens reply %s", data)
	}
}
