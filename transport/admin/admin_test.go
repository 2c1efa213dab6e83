package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
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

func call(t *testing.T, srv *httptest.Server, secret string, req Request) (string, error) {
	t.Helper()
	var out, progress bytes.Buffer
	addr := strings.TrimPrefix(srv.URL, "http://")
	err := Call(context.Background(), addr, secret, req, &progress, &out)
	return out.String(), err
}

func TestRejectsBadSecret(t *testing.T) {
	srv, secret := newTestServer(t)
	for _, s := range []string{"", "wrong", secret + "x", secret[:len(secret)-1]} {
		_, err := call(t, srv, s, Request{Command: "status"})
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("secret %q: err = %v, want 401", s, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	srv, secret := newTestServer(t)
	cases := []struct {
		req  Request
		want string
	}{
		{Request{Command: "frobnicate"}, `unknown command "frobnicate"`},
		{Request{Command: "create-repo"}, "usage: create-repo <owner>/<name>"},
		{Request{Command: "fork", Args: []string{"a/b"}}, "usage: fork"},
		{Request{Command: "create-repo", Args: []string{"nameonly"}}, "is not <owner>/<name>"},
		{Request{Command: "create-repo", Args: []string{"a/../b"}}, "invalid"},
		{Request{Command: "set-visibility", Args: []string{"a/b", "secret"}}, "public or private"},
		{Request{Command: "add-token", Args: []string{"api"}}, "reserved"},
		{Request{Command: "add-token", Args: []string{"Api"}}, "reserved"},
		{Request{Command: "create-repo", Args: []string{"API/x"}}, "reserved"},
		{Request{Command: "create-repo", Args: []string{"Api/x"}}, "reserved"},
		{Request{Command: "create-repo", Args: []string{"a/x.git.git"}}, "invalid"},
		{Request{Command: "grant", Args: []string{"a/b", "c"}}, "usage: grant"},
		{Request{Command: "grant", Args: []string{"a/b", "c", "read", "--as"}}, "--as needs a value"},
		{Request{Command: "protect", Args: []string{"a/b", "refs/heads/x", "--bogus"}}, "unknown flag --bogus"},
		{Request{Command: "protect", Args: []string{"a/b", "refs/heads/x", "--no-delete=yes"}}, "takes no value"},
		{Request{Command: "add-token", Args: []string{"alice", "--expires", "soon"}}, "--expires"},
		{Request{Command: "add-token", Args: []string{"alice", "--expires", "-3d"}}, "--expires"},
		{Request{Command: "add-token", Args: []string{"alice", "--scope", "admin"}}, "scope must be read or write"},
		{Request{Command: "revoke-token", Args: []string{"alice", "not-an-id"}}, "no such token"},
		{Request{Command: "list-keys"}, "usage: list-keys"},
	}
	for _, c := range cases {
		_, err := call(t, srv, secret, c.req)
		if !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.req, err, c.want)
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
	out, err := call(t, srv, secret, Request{Command: "version"})
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
// in the final event's Data (for --json), beside the text.
func TestTypedResults(t *testing.T) {
	const secret = "0123456789abcdef0123"
	srv := httptest.NewServer(&Server{Secret: secret, Log: zap.NewNop(), Auth: auth.NewStore(memstore.New())})
	t.Cleanup(srv.Close)
	post := func(req Request) Event {
		t.Helper()
		body, _ := json.Marshal(req)
		hr, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(body))
		hr.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var last Event
		for dec := json.NewDecoder(resp.Body); dec.More(); {
			if err := dec.Decode(&last); err != nil {
				t.Fatal(err)
			}
		}
		if last.Error != "" || !last.Done {
			t.Fatalf("%+v: %+v", req, last)
		}
		return last
	}
	ev := post(Request{Command: "add-token", Args: []string{"alice", "--scope", "read", "--name", "ci", "--expires", "30d"}})
	var issued Message
	if err := json.Unmarshal(ev.Data, &issued); err != nil || issued.Token == nil || issued.Secret != ev.Output || issued.Token.Scope != auth.ScopeRead {
		t.Fatalf("add-token data %s: %v", ev.Data, err)
	}
	ev = post(Request{Command: "list-tokens", Args: []string{"alice"}})
	var list TokenList
	if err := json.Unmarshal(ev.Data, &list); err != nil || len(list.Tokens) != 1 || list.Tokens[0].ID != issued.Token.ID ||
		list.Tokens[0].Name != "ci" || list.Tokens[0].Expires.IsZero() || strings.Contains(string(ev.Data), issued.Secret) {
		t.Fatalf("list-tokens data %s: %v", ev.Data, err)
	}
}
