package node_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// noRedirect fetches url without following redirects.
func noRedirect(t *testing.T, url string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// startAPI starts api-serve on store in front of upstream with the given
// extra variables.
func startAPI(t *testing.T, store gitenv.Store, upstream, secret string, vars map[string]string) *node.APIServer {
	t.Helper()
	env := map[string]string{"RGIT_STORE_URL": store.URL, "RGIT_UPSTREAM": upstream, "RGIT_API_ADDR": "127.0.0.1:0", "RGIT_PEER_SECRET": secret}
	for k, v := range vars {
		env[k] = v
	}
	cfg, err := config.Parse(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	api, err := node.StartAPI(context.Background(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Shutdown(context.Background()) })
	return api
}

// TestClusterPublicURLs: in a cluster (here a one-node one), the node's
// public / sends browsers to the configured web page, or says how to
// clone; api-serve's page shows the configured public git URLs, never its
// own address (which serves no git), and answers /ready only while the
// fleet and the store answer.
func TestClusterPublicURLs(t *testing.T) {
	const secret = "public-urls-secret-0123456"
	env := gitenv.New(t)
	store := gitenv.FileStore(t)
	srv := gitenv.StartServer(t, store, "RGIT_PEERS=rgit-0=127.0.0.1:1", "RGIT_SELF=rgit-0", "RGIT_PEER_SECRET="+secret,
		"RGIT_WEB_URL=https://code.example.com", "RGIT_PUBLIC_URL=https://git.example.com")
	waitServing(t, "http://"+srv.HTTPAddr+"/ready")
	srv.CreateRepo(t, "alice/web")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/web"), "main")

	for path, want := range map[string]string{"/": "https://code.example.com/", "/alice/web.git": "https://code.example.com/alice/web"} {
		if resp := noRedirect(t, "http://"+srv.HTTPAddr+path); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("node public %s: %d to %q, want a redirect to %q", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}

	api := startAPI(t, store, "http://"+srv.PeerHTTPAddr, secret, map[string]string{
		"RGIT_PUBLIC_URL": "https://git.example.com", "RGIT_PUBLIC_SSH_URL": "ssh://git@git.example.com:2222"})
	if code, body := get(t, "http://"+api.Addr+"/ready"); code != 200 || !strings.Contains(body, "ready") {
		t.Errorf("api-serve /ready = %d %q, want 200", code, body)
	}
	page := func(api *node.APIServer) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+api.Addr+"/alice/web", nil)
		req.AddCookie(&http.Cookie{Name: "rgit_token", Value: tok})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("api-serve page: %d %s", resp.StatusCode, b.String())
		}
		return b.String()
	}
	body := page(api)
	for _, want := range []string{`value="https://git.example.com/alice/web.git"`, `value="ssh://git@git.example.com:2222/alice/web.git"`} {
		if !strings.Contains(body, want) {
			t.Errorf("api-serve page lacks %s", want)
		}
	}
	if strings.Contains(body, api.Addr) {
		t.Errorf("api-serve page names its own address %s, which serves no git", api.Addr)
	}
	// Without public URLs: no clone URL at all.
	if body := page(startAPI(t, store, "http://"+srv.PeerHTTPAddr, secret, nil)); strings.Contains(body, "alice/web.git") {
		t.Errorf("api-serve page without public URLs shows a clone URL")
	}

	// An upstream nobody answers on: not ready, and says which.
	free, err := freeport.Runs(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	dead := startAPI(t, store, "http://127.0.0.1:"+strconv.Itoa(free[0]), secret, nil)
	if code, body := get(t, "http://"+dead.Addr+"/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "RGIT_UPSTREAM") {
		t.Errorf("api-serve /ready with a dead upstream = %d %q, want 503 naming RGIT_UPSTREAM", code, body)
	}
	// A wrong secret is no better than no fleet.
	wrong := startAPI(t, store, "http://"+srv.PeerHTTPAddr, secret+"-wrong", nil)
	if code, _ := get(t, "http://"+wrong.Addr+"/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("api-serve /ready with the wrong peer secret = %d, want 503", code)
	}
}

// TestClusterNodeFrontWithoutWebURL: without RGIT_WEB_URL a cluster
// node's public / is a short note on how to clone, not a bare 404.
func TestClusterNodeFrontWithoutWebURL(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_PEERS=rgit-0=127.0.0.1:1", "RGIT_SELF=rgit-0", "RGIT_PEER_SECRET=front-secret-0123456789",
		"RGIT_PUBLIC_URL=https://git.example.com")
	if code, body := get(t, "http://"+srv.HTTPAddr+"/"); code != 200 || !strings.Contains(body, "git clone https://git.example.com/OWNER/NAME.git") {
		t.Errorf("cluster node public / = %d %q", code, body)
	}
}

// TestSingleNodePublicURLs: a single node's page shows RGIT_PUBLIC_URL
// and RGIT_PUBLIC_SSH_URL as clone URLs instead of the address the
// browser used.
func TestSingleNodePublicURLs(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_PUBLIC_URL=https://git.example.com", "RGIT_PUBLIC_SSH_URL=ssh://git@git.example.com")
	srv.CreateRepo(t, "alice/web")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/web"), "main")
	srv.Admin(t, "set-visibility", "alice/web", "public")
	code, body := get(t, "http://"+srv.HTTPAddr+"/alice/web")
	if code != 200 || !strings.Contains(body, `value="https://git.example.com/alice/web.git"`) || !strings.Contains(body, `value="ssh://git@git.example.com/alice/web.git"`) {
		t.Errorf("single node page = %d without the configured clone URLs:\n%.2000s", code, body)
	}
}
