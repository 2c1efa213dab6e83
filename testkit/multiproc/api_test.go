package multiproc

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/redistest"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

func apiGet(t *testing.T, url, token string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestClusterReadAPI: api-serve answers the read API through the fleet's
// peer service, routed to the owning node like git; a node's public port
// refuses /api/ in cluster mode; access follows the git rules; api-serve
// refuses to start without the peer secret; the cache is invalidated by
// the nodes.
func TestClusterReadAPI(t *testing.T) {
	rs := redistest.Start(t, "maxmemory-policy volatile-lru")
	c, env := startCluster(t, "RGIT_REDIS_URL="+rs.URL())
	n0, n1 := c.Nodes[0], c.Nodes[1]
	alice, bob := c.token(t, n0, "alice"), c.token(t, n0, "bob")
	c.mustAdmin(t, n0, "create-repo", "alice/web")
	work := env.Scratch(t)
	head := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(alice, "alice/web"), "main")
	owner := c.waitOwner(t, n0, "alice/web", "")
	via := c.others(owner)[0]

	vars := map[string]string{
		"RGIT_STORE_URL":   c.StoreURL,
		"RGIT_UPSTREAM":    "http://" + via.PeerAddr,
		"RGIT_API_ADDR":    "127.0.0.1:0",
		"RGIT_PEER_SECRET": "",
		"RGIT_REDIS_URL":   rs.URL(),
	}
	cfg, err := config.Parse(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.StartAPI(context.Background(), cfg, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "RGIT_PEER_SECRET") {
		t.Fatalf("api-serve without the peer secret: %v", err)
	}
	cfg.PeerSecret = c.Secret
	api, err := node.StartAPI(context.Background(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Shutdown(context.Background()) })
	base := "http://" + api.Addr + "/api/alice/web/"

	// Private by default: 401 anonymous, 404 to bob, like a missing repo.
	if code, _, body := apiGet(t, base+"refs", ""); code != 401 {
		t.Errorf("anonymous, private: %d %s", code, body)
	}
	code, _, body := apiGet(t, base+"refs", bob)
	mcode, _, mbody := apiGet(t, "http://"+api.Addr+"/api/alice/none/refs", bob)
	if code != 404 || mcode != 404 || body != mbody {
		t.Errorf("bob, private: %d %s; missing: %d %s", code, body, mcode, mbody)
	}
	if code, _, _ := apiGet(t, base+"refs", "rgit_bad"); code != 401 {
		t.Errorf("bad token: %d", code)
	}
	code, _, body = apiGet(t, base+"tree/"+head, alice)
	if code != 200 || !strings.Contains(body, `"name":"a.txt"`) {
		t.Fatalf("owner through api-serve via %s (owner %s): %d %s", via.Name, owner.Name, code, body)
	}

	// The browse page runs on the api tier in a cluster: alice's
	// repository is on her list, and its file through the page.
	if code, _, body := apiGet(t, "http://"+api.Addr+"/api/repos", alice); code != 200 || !strings.Contains(body, `"name":"web"`) {
		t.Errorf("api-serve /api/repos for alice: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+api.Addr+"/alice/web/blob/"+head+"/a.txt", nil)
	req.AddCookie(&http.Cookie{Name: "rgit_token", Value: alice})
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "one") {
			t.Errorf("api-serve page for a.txt: %d %.300s", resp.StatusCode, b)
		}
	}

	// A node's public port refuses the read API in cluster mode.
	for _, n := range c.Nodes {
		code, _, body := apiGet(t, "http://"+n.HTTPAddr+"/api/alice/web/refs", alice)
		var e struct{ Error string }
		if code != 404 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, "api-serve") {
			t.Errorf("%s public /api/: %d %s", n.Name, code, body)
		}
	}

	// Public: cached at api-serve once its name-index cache sees the
	// flip (the private answers above are remembered up to
	// repo.DefaultMetaTTL); a push on the owner drops refs.
	c.mustAdmin(t, n0, "set-visibility", "alice/web", "public")
	flipped := time.Now()
	for {
		apiGet(t, base+"refs", "")
		_, h, _ := apiGet(t, base+"refs", "")
		if h.Get("X-Cache") == "hit" {
			break
		}
		if time.Since(flipped) > repo.DefaultMetaTTL+2*time.Second {
			t.Fatalf("refs not cached %v after going public: %v", time.Since(flipped), h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	next := env.Commit(t, work, "two", map[string]string{"b.txt": "two\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(alice, "alice/web"), "main")
	if _, h, body := apiGet(t, base+"refs", ""); h.Get("X-Cache") == "hit" || !strings.Contains(body, next) {
		t.Errorf("refs after push: %v %s", h, body)
	}
	apiGet(t, base+"tree/"+head, "")
	c.mustAdmin(t, n1, "set-visibility", "alice/web", "private")
	if code, h, _ := apiGet(t, base+"tree/"+head, ""); code != 401 || h.Get("X-Cache") == "hit" {
		t.Errorf("after the flip to private: %d %v", code, h)
	}
}
