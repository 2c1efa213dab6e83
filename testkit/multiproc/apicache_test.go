package multiproc

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/redistest"
)

// startAPIServe runs `rgit api-serve` (Cluster.StartAPIServe) until the
// test ends and returns its address; a failed test logs its log.
func startAPIServe(t *testing.T, c *Cluster, via *Node, env ...string) string {
	t.Helper()
	a, err := c.StartAPIServe(context.Background(), rgitBin(t), via, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("--- api-serve log:\n%s", a.Log())
		}
	})
	return a.Addr
}

// TestAPICacheWithoutNodeInvalidation is the cluster laid out as the
// README's "Running a cluster" starts it (no RGIT_REDIS_URL on the
// nodes, so no node can purge the cache) with api-serve and Redis as the
// Read API section shows: a public repository's commit is cached, then
// made private; the flip succeeds, and api-serve stops answering the
// commit from its cache within the name index's cache lifetime, however
// long the cached answer itself would live.
func TestAPICacheWithoutNodeInvalidation(t *testing.T) {
	rs := redistest.Start(t, "maxmemory-policy volatile-lru")
	c, env := startCluster(t)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	alice := c.token(t, n0, "alice")
	c.mustAdmin(t, n0, "create-repo", "alice/clu")
	work := env.Scratch(t)
	head := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(alice, "alice/clu"), "main")
	c.mustAdmin(t, n0, "set-visibility", "alice/clu", "public")
	api := startAPIServe(t, c, c.Nodes[2], "RGIT_REDIS_URL="+rs.URL())

	url := "http://" + api + "/api/alice/clu/commit/" + head
	if code, _, body := apiGet(t, url, ""); code != 200 {
		t.Fatalf("public commit: %d %s", code, body)
	}
	if code, h, _ := apiGet(t, url, ""); code != 200 || h.Get("X-Cache") != "hit" {
		t.Fatalf("public commit, second read: %d X-Cache %q", code, h.Get("X-Cache"))
	}
	out := c.mustAdmin(t, n1, "set-visibility", "alice/clu", "private")
	flipped := time.Now()
	if !strings.Contains(out, "is private") {
		t.Fatalf("set-visibility: %q", out)
	}
	bound := repo.DefaultMetaTTL + 2*time.Second
	for {
		code, h, body := apiGet(t, url, "")
		if code == http.StatusUnauthorized && h.Get("X-Cache") != "hit" {
			break
		}
		if code != 200 || h.Get("X-Cache") != "hit" {
			t.Fatalf("after the flip: %d X-Cache %q %s", code, h.Get("X-Cache"), body)
		}
		if time.Since(flipped) > bound {
			t.Fatalf("a private repository's commit still served from the cache %v after the flip", time.Since(flipped).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("cached answers stopped %v after the flip (bound %v)", time.Since(flipped).Round(time.Millisecond), repo.DefaultMetaTTL)
	for range 3 {
		if code, h, _ := apiGet(t, url, ""); code != http.StatusUnauthorized || h.Get("X-Cache") == "hit" {
			t.Fatalf("private, later: %d X-Cache %q", code, h.Get("X-Cache"))
		}
		if code, _, body := apiGet(t, url, alice); code != 200 {
			t.Fatalf("the owner of the private repository: %d %s", code, body)
		}
	}
}
