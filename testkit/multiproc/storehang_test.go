package multiproc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/outage"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestClusterStoreHang: three nodes on versitygw, warm repositories
// owned by different nodes, and the store stopped with SIGSTOP for 30 s
// (connections accepted, nothing answered), longer than the 10 s lease;
// then killed (connections refused) for as long and started again.
// The leader cannot persist the session renewals meanwhile and
// acknowledges them from memory (RGIT_LEASE_STORE_GRACE_SECS), so
// ls-remote, fetches and clones of every warm repository through every
// node keep succeeding: failed must be 0. A push fails naming the store
// within a bounded time; after SIGCONT a push succeeds within 5 s, and
// every acknowledged push is there.
func TestClusterStoreHang(t *testing.T) {
	const (
		hang  = 30 * time.Second
		repos = 6
	)
	s3 := s3local.Start(t)
	// Rebalancing off: a repository moved just before the hang would be
	// cold on its new owner, and cold repositories answer 503.
	c, env := startClusterWith(t, Options{StoreURL: "s3://" + s3.Bucket + "/hang", Env: append(s3.Env(), "RGIT_REBALANCE=0")})
	tok := c.token(t, c.Nodes[0], "alice")
	dir := env.Scratch(t)
	env.Commit(t, dir, "one", map[string]string{"a": "1"})
	var names []string
	owners := map[string]bool{}
	for i := range repos {
		r := fmt.Sprintf("alice/hang-%d", i)
		names = append(names, r)
		c.mustAdmin(t, c.Nodes[0], "create-repo", r)
		env.Run(t, dir, "push", "-q", c.Nodes[i%3].HTTPURL(tok, r), "HEAD:refs/heads/main")
		// Warm on its owner: read once through every node.
		for _, n := range c.Nodes {
			env.Run(t, dir, "ls-remote", n.HTTPURL(tok, r))
		}
	}
	for _, r := range names {
		w := c.mustAdmin(t, c.Nodes[1], "where", r)
		for _, n := range c.Nodes {
			if strings.Contains(w, n.Name) {
				owners[n.Name] = true
			}
		}
	}
	t.Logf("owners of the %d repositories: %v", repos, owners)
	if len(owners) < 2 {
		t.Fatalf("every repository on one node (%v): the test needs owners on several", owners)
	}
	head := strings.TrimSpace(env.Run(t, dir, "rev-parse", "HEAD"))

	// The same cluster through both outages, one after the other: the
	// store hanging (SIGSTOP), then refusing (killed, started again).
	for _, f := range []struct {
		name       string
		begin, end func() error
	}{
		{"hang", s3.Pause, s3.Resume},
		{"refuse", s3.Kill, s3.Restart},
	} {
		storeOutage(t, c, env, dir, tok, names, head, f.name, f.begin, f.end, hang)
	}
}

// storeOutage takes the store away with begin for about length, reading
// every warm repository through every node meanwhile, brings it back with
// end, and checks and prints what the clients saw:
//
//	outage case=<name> nodes=3 outage_s=… served=… failed=0 push_fail_s=… recover_s=… store_requests=… failed_fast=… lost=0
//
// store_requests are the requests the nodes sent the store during the
// outage, failed_fast those they refused themselves (the store being
// down), summed over the nodes' rgit_store_requests_total.
func storeOutage(t *testing.T, c *Cluster, env *gitenv.Env, dir, tok string, names []string, head, name string, begin, end func() error, length time.Duration) {
	const (
		pushFail  = 25 * time.Second // the node's 10 s store deadline, twice, and slack
		recoverIn = 5 * time.Second
	)
	storeCalls := func() map[string]int {
		sum := map[string]int{}
		for _, n := range c.Nodes {
			by, err := outage.StoreRequests(gitenv.MetricsPage(t, n.MetricsAddr))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range by {
				sum[k] += v
			}
		}
		return sum
	}
	before := storeCalls()
	if err := begin(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	ended := false
	defer func() {
		if !ended {
			end()
		}
	}()

	// A push made as the outage begins is refused naming the store.
	env.Commit(t, dir, name, map[string]string{"a": name})
	start := time.Now()
	r := env.Try(dir, "push", "-q", c.Nodes[2].HTTPURL(tok, names[0]), "HEAD:refs/heads/during-"+name)
	pushFailS := time.Since(start)
	switch {
	case r.OK():
		t.Errorf("%s: a push during the outage was acknowledged", name)
	case !strings.Contains(r.Stderr, "store"):
		t.Errorf("%s: the push during the outage failed without naming the store: %s", name, r.Stderr)
	case pushFailS > pushFail:
		t.Errorf("%s: the push during the outage took %s to fail, want at most %s", name, pushFailS, pushFail)
	}

	// Warm reads through every node until the outage has lasted its time.
	served, failed := 0, 0
	var failures []string
	for i := 0; time.Since(paused) < length; i++ {
		n := c.Nodes[i%len(c.Nodes)]
		repo := names[(i/len(c.Nodes))%len(names)]
		var res gitenv.Result
		kind := []string{"ls-remote", "fetch", "clone"}[i%3]
		switch kind {
		case "ls-remote":
			res = env.Try(dir, "ls-remote", n.HTTPURL(tok, repo), "refs/heads/main")
		case "fetch":
			res = env.Try(dir, "fetch", "-q", n.HTTPURL(tok, repo), "refs/heads/main")
		default:
			res = env.Try("", "clone", "-q", "--bare", n.HTTPURL(tok, repo), env.Scratch(t)+"/c.git")
		}
		if res.OK() {
			served++
		} else {
			failed++
			failures = append(failures, fmt.Sprintf("%s %s via %s at +%s: %s", kind, repo, n.Name, time.Since(paused).Round(time.Millisecond), res.String()))
		}
	}
	during := storeCalls()
	if err := end(); err != nil {
		t.Fatal(err)
	}
	ended = true
	outageS := time.Since(paused)

	// A push succeeds within recoverIn of the store's return.
	back := time.Now()
	var recoverS time.Duration
	for {
		r := env.Try(dir, "push", "-q", c.Nodes[1].HTTPURL(tok, names[1]), "HEAD:refs/heads/after-"+name)
		if r.OK() {
			recoverS = time.Since(back)
			break
		}
		if time.Since(back) > recoverIn {
			t.Fatalf("%s: no push accepted within %s of the store's return: %s", name, recoverIn, r.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tip := strings.TrimSpace(env.Run(t, dir, "rev-parse", "HEAD"))
	lost := 0
	for i, want := range map[string]string{names[0] + " refs/heads/main": head, names[1] + " refs/heads/after-" + name: tip} {
		repo, ref, _ := strings.Cut(i, " ")
		refs := ParseLsRemote(env.Run(t, dir, "ls-remote", c.Nodes[0].HTTPURL(tok, repo)))
		if refs[ref] != want {
			lost++
			t.Errorf("%s: %s %s is %q after the outage, want %s", name, repo, ref, refs[ref], want)
		}
	}
	sent, fast := 0, during["failed_fast"]-before["failed_fast"]
	for k, v := range during {
		if k != "failed_fast" {
			sent += v - before[k]
		}
	}
	line := fmt.Sprintf("outage case=%s nodes=3 outage_s=%.1f served=%d failed=%d push_fail_s=%.2f recover_s=%.2f store_requests=%d failed_fast=%d lost=%d",
		name, outageS.Seconds(), served, failed, pushFailS.Seconds(), recoverS.Seconds(), sent, fast, lost)
	t.Log(line)
	fmt.Println(line)
	if failed > 0 {
		t.Errorf("%s: %d warm reads failed during the outage:\n%s", name, failed, strings.Join(failures, "\n"))
	}
	if served == 0 {
		t.Errorf("%s: no warm read was served during the outage", name)
	}
}
