package multiproc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestClusterStoreHang: three nodes on versitygw, warm repositories
// owned by different nodes, and the store stopped with SIGSTOP for 30 s
// (connections accepted, nothing answered), longer than the 10 s lease.
// The leader cannot persist the session renewals meanwhile and
// acknowledges them from memory (RGIT_LEASE_STORE_GRACE_SECS), so
// ls-remote, fetches and clones of every warm repository through every
// node keep succeeding: failed must be 0. A push fails naming the store
// within a bounded time; after SIGCONT a push succeeds within 5 s, and
// every acknowledged push is there.
func TestClusterStoreHang(t *testing.T) {
	const (
		hang      = 30 * time.Second
		repos     = 6
		pushFail  = 25 * time.Second // the node's 10 s store deadline, twice, and slack
		recoverIn = 5 * time.Second
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

	if err := s3.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			s3.Resume()
		}
	}()

	// A push made as the hang begins is refused naming the store.
	env.Commit(t, dir, "two", map[string]string{"a": "2"})
	start := time.Now()
	r := env.Try(dir, "push", "-q", c.Nodes[2].HTTPURL(tok, names[0]), "HEAD:refs/heads/during")
	pushFailS := time.Since(start)
	switch {
	case r.OK():
		t.Errorf("a push during the hang was acknowledged")
	case !strings.Contains(r.Stderr, "store"):
		t.Errorf("the push during the hang failed without naming the store: %s", r.Stderr)
	case pushFailS > pushFail:
		t.Errorf("the push during the hang took %s to fail, want at most %s", pushFailS, pushFail)
	}

	// Warm reads through every node until the hang has lasted its time.
	served, failed := 0, 0
	var failures []string
	for i := 0; time.Since(paused) < hang; i++ {
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
	if err := s3.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	hangS := time.Since(paused)

	// A push succeeds within recoverIn of the store's return.
	back := time.Now()
	var recoverS time.Duration
	for {
		r := env.Try(dir, "push", "-q", c.Nodes[1].HTTPURL(tok, names[1]), "HEAD:refs/heads/after")
		if r.OK() {
			recoverS = time.Since(back)
			break
		}
		if time.Since(back) > recoverIn {
			t.Fatalf("no push accepted within %s of the store's return: %s", recoverIn, r.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tip := strings.TrimSpace(env.Run(t, dir, "rev-parse", "HEAD"))
	lost := 0
	for i, want := range map[string]string{names[0] + " refs/heads/main": head, names[1] + " refs/heads/after": tip} {
		repo, ref, _ := strings.Cut(i, " ")
		refs := ParseLsRemote(env.Run(t, dir, "ls-remote", c.Nodes[0].HTTPURL(tok, repo)))
		if refs[ref] != want {
			lost++
			t.Errorf("%s %s is %q after the hang, want %s", repo, ref, refs[ref], want)
		}
	}
	line := fmt.Sprintf("outage case=hang nodes=3 hang_s=%.1f served=%d failed=%d push_fail_s=%.2f recover_s=%.2f lost=%d",
		hangS.Seconds(), served, failed, pushFailS.Seconds(), recoverS.Seconds(), lost)
	t.Log(line)
	fmt.Println(line)
	if failed > 0 {
		t.Errorf("%d warm reads failed during the hang:\n%s", failed, strings.Join(failures, "\n"))
	}
	if served == 0 {
		t.Error("no warm read was served during the hang")
	}
}
