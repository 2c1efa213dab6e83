package multiproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/gitenv"
)

// The rgit binary is built once per test binary run, into a directory
// TestMain removes.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// moduleRoot is the repository root (this file is testkit/multiproc/…).
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// rgitBin builds the rgit binary once per test binary run.
func rgitBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, err := os.MkdirTemp("", "multiproc-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath, binErr = Build(context.Background(), moduleRoot(), binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// startCluster starts three nodes; env adds KEY=value settings to each.
func startCluster(t *testing.T, env ...string) (*Cluster, *gitenv.Env) {
	t.Helper()
	return startClusterWith(t, Options{Env: env})
}

// startClusterWith starts the nodes of o, three unless o.Nodes says
// otherwise (Dir is filled in, and Bin if empty).
func startClusterWith(t *testing.T, o Options) (*Cluster, *gitenv.Env) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster test: skipped with -short")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := o.Bin
	if bin == "" {
		bin = rgitBin(t)
	}
	var err error
	var c *Cluster
	for attempt := 0; ; attempt++ {
		o.Bin, o.Dir = bin, filepath.Join(dir, fmt.Sprint("c", attempt))
		if o.Nodes == 0 {
			o.Nodes = 3
		}
		c, err = Start(ctx, o)
		if err == nil || attempt == 2 {
			break
		}
		t.Logf("start cluster (attempt %d): %v", attempt, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() || os.Getenv("MULTIPROC_LOGS") != "" {
			for _, n := range c.Nodes {
				t.Logf("--- %s log tail:\n%s", n.Name, n.LogTail(40))
			}
		}
	})
	return c, gitenv.New(t)
}

func (c *Cluster) mustAdmin(t *testing.T, n *Node, cmd string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Admin(ctx, n, cmd, args...)
	if err != nil {
		t.Fatalf("admin %s %v on %s: %v", cmd, args, n.Name, err)
	}
	return out
}

// sshKey registers a new SSH key for owner through node n and returns the
// environment git needs to use it.
func (c *Cluster) sshKey(t *testing.T, env *gitenv.Env, n *Node, owner string) []string {
	t.Helper()
	key := env.NewSSHKey(t, owner)
	pub, err := os.ReadFile(key.Public)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(context.Background(), n, "add-key", owner, string(pub)); err != nil {
		t.Fatal(err)
	}
	return gitenv.SSHEnv(key)
}

func (c *Cluster) token(t *testing.T, n *Node, owner string) string {
	lines := strings.Split(c.mustAdmin(t, n, "add-token", owner), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// openOn reports whether node holds repo open (admin status).
func (c *Cluster) openOn(t *testing.T, n *Node, repo string) bool {
	return strings.Contains(c.mustAdmin(t, n, "status"), repo)
}

// ownedRe matches admin "where" for a live lease.
var ownedRe = regexp.MustCompile(`is owned by (\S+) \(epoch \d+, lease live`)

// waitOwner polls admin "where" on n until its view names a live owner of
// repo (want, unless want is ""), and returns that node. Placement
// steering decides owners, so tests ask the cluster instead of assuming.
func (c *Cluster) waitOwner(t *testing.T, n *Node, repo, want string) *Node {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := c.Admin(context.Background(), n, "where", repo)
		if m := ownedRe.FindStringSubmatch(out); err == nil && m != nil && (want == "" || m[1] == want) {
			for _, o := range c.Nodes {
				if o.Name == m[1] {
					return o
				}
			}
			t.Fatalf("%s names unknown owner %q of %s", n.Name, m[1], repo)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw a live owner %q of %s: %q %v", n.Name, want, repo, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// others returns the nodes other than the given ones, in order.
func (c *Cluster) others(not ...*Node) []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if !slices.Contains(not, n) {
			out = append(out, n)
		}
	}
	return out
}

// nonLeaderRepo returns alice/<prefix>-<i> for the first i whose
// rendezvous winner among all nodes is not the leader. Pushed first
// through a non-leader it lands on a non-leader whether the leader steers
// already (the winner) or not yet (the requester, before
// cluster.SettleTime): failover tests need an owner that can die while
// the leader lives.
func (c *Cluster) nonLeaderRepo(prefix string) string {
	live := make(rc.LiveSet, len(c.Nodes))
	for i, n := range c.Nodes {
		live[i] = rc.NodeWeight{Node: n.Name, Weight: 1}
	}
	for i := 0; ; i++ {
		r := fmt.Sprintf("alice/%s-%d", prefix, i)
		if rc.Rendezvous(names.MustParse(r), live) != c.Nodes[0].Name {
			return r
		}
	}
}

// TestClusterForwarding: clone and push over HTTP and SSH through nodes
// that do not own the repository; admin commands sent to any node reach
// the owner.
func TestClusterForwarding(t *testing.T) {
	c, env := startCluster(t)
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	tok := c.token(t, n0, "alice")
	sshEnv := c.sshKey(t, env, n2, "alice")
	c.mustAdmin(t, n0, "create-repo", "alice/fwd")

	// The first push goes through rgit-1, which claims the repository; the
	// leader grants it to rgit-1 or steers it to the placement winner.
	work := env.Scratch(t)
	c1 := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(tok, "alice/fwd"), "main")
	owner := c.waitOwner(t, n0, "alice/fwd", "")
	if !c.openOn(t, owner, "alice/fwd") {
		t.Fatalf("%s owns alice/fwd but does not hold it open", owner.Name)
	}
	others := c.others(owner)
	httpVia, sshVia := others[0], others[1]

	// HTTP clone and push through a non-owner (forwarded).
	clone := filepath.Join(t.TempDir(), "c")
	env.Run(t, "", "clone", "-q", httpVia.HTTPURL(tok, "alice/fwd"), clone)
	if got := env.Run(t, clone, "rev-parse", "HEAD"); got != c1 {
		t.Fatalf("clone via %s HEAD = %s, want %s", httpVia.Name, got, c1)
	}
	c2 := env.Commit(t, clone, "two", map[string]string{"b.txt": "two\n"})
	env.Run(t, clone, "push", "-q", "origin", "main")

	// SSH clone and push through the other non-owner (forwarded session).
	sclone := filepath.Join(t.TempDir(), "s")
	env.RunEnv(t, "", sshEnv, "clone", "-q", sshVia.SSHURL("alice/fwd"), sclone)
	if got := env.Run(t, sclone, "rev-parse", "HEAD"); got != c2 {
		t.Fatalf("ssh clone via %s HEAD = %s, want %s", sshVia.Name, got, c2)
	}
	c3 := env.Commit(t, sclone, "three", map[string]string{"c.txt": "three\n"})
	env.RunEnv(t, sclone, sshEnv, "push", "-q", "origin", "main")
	env.Fsck(t, sclone)

	for _, n := range others {
		if c.openOn(t, n, "alice/fwd") {
			t.Errorf("%s opened alice/fwd: requests were served there, not forwarded", n.Name)
		}
	}
	if got := env.Run(t, "", "ls-remote", sshVia.HTTPURL(tok, "alice/fwd"), "refs/heads/main"); !strings.HasPrefix(got, c3) {
		t.Fatalf("ls-remote via %s = %q, want %s", sshVia.Name, got, c3)
	}
	if o := c.waitOwner(t, n0, "alice/fwd", ""); o != owner {
		t.Errorf("alice/fwd moved from %s to %s", owner.Name, o.Name)
	}

	// Access commands sent to a non-owner reach the owner's repo actor
	// (flags before the repository included), and a forwarded SSH session
	// carries the whole identity: a read-only deploy key cannot push
	// through a non-owner, and the protection set through one holds.
	c.mustAdmin(t, httpVia, "protect", "--no-delete", "alice/fwd", "refs/heads/main", "--as", "alice")
	if r := env.TryEnv(sclone, sshEnv, "push", sshVia.SSHURL("alice/fwd"), ":refs/heads/main"); r.OK() || !strings.Contains(r.Stderr, "protected branch") {
		t.Fatalf("delete of protected main via %s:\n%s", sshVia.Name, r)
	}
	dk := env.NewSSHKey(t, "deploy")
	dpub, err := os.ReadFile(dk.Public)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(context.Background(), httpVia, "add-deploy-key", "alice/fwd", string(dpub)); err != nil {
		t.Fatal(err)
	}
	if r := env.TryEnv(sclone, gitenv.SSHEnv(dk), "ls-remote", sshVia.SSHURL("alice/fwd")); !r.OK() {
		t.Fatalf("read-only deploy key read via %s:\n%s", sshVia.Name, r)
	}
	if r := env.TryEnv(sclone, gitenv.SSHEnv(dk), "push", sshVia.SSHURL("alice/fwd"), "HEAD:refs/heads/deploy"); r.OK() || !strings.Contains(r.Stderr, "permission denied") {
		t.Fatalf("read-only deploy key push via %s:\n%s", sshVia.Name, r)
	}

	// A token every node has cached stops working everywhere within the
	// credential cache TTL after revoke-token on one node.
	revoked := c.token(t, n0, "alice")
	for _, n := range c.Nodes {
		env.Run(t, "", "ls-remote", n.HTTPURL(revoked, "alice/fwd"))
	}
	tokens := strings.Split(c.mustAdmin(t, n0, "list-tokens", "alice"), "\n")
	id := strings.Fields(tokens[len(tokens)-1])[0] // oldest first: the newest token is last
	c.mustAdmin(t, n0, "revoke-token", "alice", id)
	revokedAt := time.Now()
	for _, n := range c.Nodes {
		for {
			r := env.Try("", "ls-remote", n.HTTPURL(revoked, "alice/fwd"))
			if !r.OK() {
				// git prints a 401 on its first request as an
				// authentication failure, and one on a later request of
				// the same command (the cache expired between them) as
				// the HTTP status.
				if !strings.Contains(r.Stderr, "Authentication failed") && !strings.Contains(r.Stderr, "could not read") &&
					!strings.Contains(r.Stderr, "HTTP 401") {
					t.Fatalf("revoked token on %s: %s", n.Name, r)
				}
				break
			}
			if time.Since(revokedAt) > auth.DefaultPositiveTTL+5*time.Second {
				t.Fatalf("%s still accepts a token revoked %v ago", n.Name, time.Since(revokedAt))
			}
			time.Sleep(50 * time.Millisecond) // poll, as waitOwner does
		}
	}
	t.Logf("revoked token refused by every node %v after revoke-token (bound: %v)", time.Since(revokedAt).Round(10*time.Millisecond), auth.DefaultPositiveTTL)

	// Admin on a non-owner is delivered to the owner: no fencing anywhere.
	// The relaying node forgets its cached index entry at once (others
	// within the cache TTL: README "Names").
	c.mustAdmin(t, httpVia, "set-visibility", "alice/fwd", "public")
	anon := filepath.Join(t.TempDir(), "anon")
	env.Run(t, "", "clone", "-q", "http://"+httpVia.HTTPAddr+"/alice/fwd.git", anon)

	// A wrong peer secret is refused on both peer ports.
	for _, addr := range []string{owner.PeerAddr, owner.StreamAddr} {
		r := env.Command("", nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
			"-H", "X-Rgit-Peer-Secret: wrong", "-H", "Authorization: Bearer wrong", "-H", "X-Rgit-Hop: 1",
			"http://"+addr+"/alice/fwd.git/info/refs?service=git-upload-pack")
		if strings.TrimSpace(r.Stdout) != "401" {
			t.Errorf("peer port %s with a wrong secret: %q, want 401", addr, r.Stdout)
		}
	}
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "fenced") {
			t.Errorf("%s logged fencing", n.Name)
		}
	}
}

// TestClusterGCRepack: gc and repack sent to any node run through the
// owner's repo actor (relayed when needed), so the owner is never fenced
// and every push around them is acknowledged.
func TestClusterGCRepack(t *testing.T) {
	c, env := startCluster(t)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	tok := c.token(t, n0, "alice")
	const repo = "alice/maint"
	c.mustAdmin(t, n0, "create-repo", repo)
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(tok, repo), "main")
	owner := c.waitOwner(t, n0, repo, "")
	other := c.others(owner)[0]

	step := 0
	pushVia := func(n *Node) {
		t.Helper()
		step++
		next := env.Commit(t, work, fmt.Sprint("step ", step), map[string]string{fmt.Sprint(step, ".txt"): "x\n"})
		if r := env.Try(work, "push", n.HTTPURL(tok, repo), "main"); !r.OK() {
			t.Fatalf("push %d via %s: %s", step, n.Name, r)
		}
		if got := env.Run(t, "", "ls-remote", n0.HTTPURL(tok, repo), "refs/heads/main"); !strings.HasPrefix(got, next) {
			t.Fatalf("push %d via %s: server has %q, pushed %s", step, n.Name, got, next)
		}
	}
	c.mustAdmin(t, owner, "gc", repo)
	pushVia(owner)
	c.mustAdmin(t, other, "gc", repo) // relayed to the owner
	pushVia(other)
	if out := c.mustAdmin(t, other, "repack", repo); !strings.Contains(out, "repacked "+repo) {
		t.Fatalf("repack said %q", out)
	}
	pushVia(owner)
	c.mustAdmin(t, owner, "repack", repo)
	pushVia(other)
	clone := filepath.Join(t.TempDir(), "c")
	env.Run(t, "", "clone", "-q", other.HTTPURL(tok, repo), clone)
	env.Fsck(t, clone)
	if o := c.waitOwner(t, n0, repo, ""); o != owner {
		t.Errorf("%s moved from %s to %s", repo, owner.Name, o.Name)
	}
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "fenced") {
			t.Errorf("%s logged fencing", n.Name)
		}
	}
}

// outcome is one fetch of a fetch loop, with its time.
type outcome struct {
	at  time.Time
	ok  bool
	msg string
}

// fetchLoop runs ls-remote against url until stop is closed; ok counts
// the successful ones so far, so tests wait for progress instead of time.
type fetchLoop struct {
	ok  atomic.Int64
	res chan []outcome
}

func startFetchLoop(env *gitenv.Env, url string, stop <-chan struct{}) *fetchLoop {
	l := &fetchLoop{res: make(chan []outcome, 1)}
	go func() {
		var out []outcome
		for {
			select {
			case <-stop:
				l.res <- out
				return
			default:
			}
			r := env.Try("", "ls-remote", url, "refs/heads/main")
			if r.OK() {
				l.ok.Add(1)
			}
			out = append(out, outcome{at: time.Now(), ok: r.OK(), msg: r.Stderr})
		}
	}()
	return l
}

// waitOK waits until at least n fetches have succeeded in total.
func (l *fetchLoop) waitOK(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.ok.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d fetches succeeded within 20s", l.ok.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterFailover: kill -9 of the owner during a fetch loop (the repo
// moves, the takeover time is printed), then SIGTERM of the new owner
// (its repos move through the drain, without fencing and without a
// failed request).
func TestClusterFailover(t *testing.T) {
	c, env := startCluster(t)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	tok := c.token(t, n0, "alice")
	ha := c.nonLeaderRepo("ha")
	c.mustAdmin(t, n0, "create-repo", ha)
	work := env.Scratch(t)
	head := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(tok, ha), "main")
	owner := c.waitOwner(t, n0, ha, "")
	if owner == n0 {
		t.Fatalf("%s landed on the leader; nonLeaderRepo should prevent that", ha)
	}
	entry := c.others(n0, owner)[0] // the other non-leader

	// kill -9 the owner while the other non-leader serves a fetch loop.
	stop := make(chan struct{})
	loop := startFetchLoop(env, entry.HTTPURL(tok, ha), stop)
	loop.waitOK(t, 3) // a few successful fetches first
	killed := time.Now()
	if err := owner.Kill(); err != nil {
		t.Fatal(err)
	}
	var resumed time.Time
	deadline := time.Now().Add(20 * time.Second)
	for resumed.IsZero() && time.Now().Before(deadline) {
		r := env.Try("", "ls-remote", entry.HTTPURL(tok, ha), "refs/heads/main")
		if r.OK() && strings.HasPrefix(r.Out(), head) {
			resumed = time.Now()
		}
	}
	close(stop)
	outs := <-loop.res
	if resumed.IsZero() {
		t.Fatalf("service did not resume within 20s after kill -9 of the owner")
	}
	// The takeover is when the first request after the kill succeeded
	// (the loop's or the probe's).
	first := resumed
	for _, o := range outs {
		if o.ok && o.at.After(killed) && o.at.Before(first) {
			first = o.at
		}
	}
	secs := first.Sub(killed).Seconds()
	t.Logf("takeover op=kill9 seconds=%.2f", secs)
	fmt.Printf("takeover op=kill9 seconds=%.2f\n", secs)
	// The force-grant goes to the node that could not connect.
	c.waitOwner(t, n0, ha, entry.Name)
	if !c.openOn(t, entry, ha) {
		t.Errorf("%s does not hold %s after the takeover", entry.Name, ha)
	}

	// SIGTERM the new owner during a fetch loop through the leader: the
	// lease is released through the drain, the leader (the only node left)
	// takes over, and no request fails, not even one routed at the drain
	// boundary.
	stop = make(chan struct{})
	loop = startFetchLoop(env, n0.HTTPURL(tok, ha), stop)
	loop.waitOK(t, 3)
	termAt := time.Now()
	if err := entry.Term(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A few more fetches after the drain, served by the new owner.
	loop.waitOK(t, loop.ok.Load()+3)
	close(stop)
	outs = <-loop.res
	checkNoFailures(t, outs, termAt, "SIGTERM")
	for _, n := range []*Node{n0, entry} {
		if strings.Contains(n.Log(), "fenced") {
			t.Errorf("%s logged fencing:\n%s", n.Name, n.LogTail(30))
		}
	}
	c.waitOwner(t, n0, ha, n0.Name)
	if !c.openOn(t, n0, ha) {
		t.Errorf("%s does not hold %s after %s drained", n0.Name, ha, entry.Name)
	}
}

// checkNoFailures fails t for every failed fetch in outs and when none
// completed after at.
func checkNoFailures(t *testing.T, outs []outcome, at time.Time, what string) {
	t.Helper()
	var failed []string
	after := 0
	for _, o := range outs {
		if o.at.After(at) {
			after++
		}
		if !o.ok {
			failed = append(failed, o.at.Sub(at).String()+": "+o.msg)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d fetches failed around %s:\n%s", len(failed), len(outs), what, strings.Join(failed, "\n"))
	}
	if after == 0 {
		t.Errorf("no fetch completed after %s", what)
	}
}

// TestClusterLeaderDown: with the leader gone, repositories already owned
// keep serving (directly and forwarded) and a cold one answers 503.
func TestClusterLeaderDown(t *testing.T) {
	c, env := startCluster(t)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	tok := c.token(t, n0, "alice")
	warm := c.nonLeaderRepo("warm")
	c.mustAdmin(t, n0, "create-repo", warm)
	c.mustAdmin(t, n0, "create-repo", "alice/cold")
	work := env.Scratch(t)
	head := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n1.HTTPURL(tok, warm), "main")
	owner := c.waitOwner(t, n0, warm, "")
	if owner == n0 {
		t.Fatalf("%s landed on the leader; nonLeaderRepo should prevent that", warm)
	}
	// The followers can route without the leader only once their views
	// name the owner: ask each until it does.
	followers := c.others(n0)
	for _, n := range followers {
		c.waitOwner(t, n, warm, owner.Name)
	}
	if err := n0.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, n := range followers { // the owner and a forwarder
		if got := env.Run(t, "", "ls-remote", n.HTTPURL(tok, warm), "refs/heads/main"); !strings.HasPrefix(got, head) {
			t.Errorf("warm repo via %s with the leader down: %q", n.Name, got)
		}
	}
	r := env.Command("", nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-u", "x:"+tok,
		"http://"+followers[1].HTTPAddr+"/alice/cold.git/info/refs?service=git-upload-pack")
	if strings.TrimSpace(r.Stdout) != "503" {
		t.Errorf("cold repo with the leader down: HTTP %q, want 503", r.Stdout)
	}
}
