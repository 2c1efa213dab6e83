package multiproc

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/product/admin"
)

// rollOp is one client operation of the rolling restart test.
type rollOp struct {
	what, node string
	at         time.Time
	err        string // "" on success
}

// TestRollingRestartGate rolls the three nodes one by one, highest
// ordinal first and the leader last, each step gated on the rollout
// status, while clients push (HTTP), fetch (SSH) and clone (HTTP) through
// every node: no operation fails and every acknowledged push is there
// afterwards.
func TestRollingRestartGate(t *testing.T) {
	c, env := startCluster(t)
	n0 := c.Nodes[0]
	tok := c.token(t, n0, "alice")
	sshEnv := c.sshKey(t, env, n0, "alice")

	// One repository per node, first pushed through it (steering spreads
	// them by placement; either way several owners move in the rollout).
	type worker struct {
		repo, work string
		acked      string // last acknowledged push
		ops        []rollOp
	}
	workers := make([]*worker, len(c.Nodes))
	for i, n := range c.Nodes {
		w := &worker{repo: fmt.Sprintf("alice/roll-%d", i), work: env.Scratch(t)}
		c.mustAdmin(t, n0, "create-repo", w.repo)
		w.acked = env.Commit(t, w.work, "base", map[string]string{"a.txt": w.repo + "\n"})
		env.Run(t, w.work, "push", "-q", n.HTTPURL(tok, w.repo), "main")
		workers[i] = w
	}

	lb := NewBalancer(c.Nodes)
	stop := make(chan struct{})
	var cycles atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do := func(what string, run func(n *Node) gitenv.Result) gitenv.Result {
				n, done := lb.Pick()
				r := run(n)
				done()
				op := rollOp{what: what, node: n.Name, at: time.Now()}
				if !r.OK() {
					op.err = strings.TrimSpace(r.Stderr)
				}
				w.ops = append(w.ops, op)
				return r
			}
			for cycle := 0; ; cycle++ {
				select {
				case <-stop:
					return
				default:
				}
				if r := env.Try(w.work, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("c", cycle)); !r.OK() {
					w.ops = append(w.ops, rollOp{what: "commit", err: r.Stderr})
					return
				}
				head := strings.TrimSpace(env.Try(w.work, "rev-parse", "HEAD").Stdout)
				if do("push", func(n *Node) gitenv.Result {
					return env.Try(w.work, "push", "-q", n.HTTPURL(tok, w.repo), "main")
				}).OK() {
					w.acked = head
				}
				do("fetch", func(n *Node) gitenv.Result {
					return env.TryEnv(w.work, sshEnv, "fetch", "-q", n.SSHURL(w.repo), "main")
				})
				if cycle%3 == 0 {
					dir := filepath.Join(t.TempDir(), "c")
					if do("clone", func(n *Node) gitenv.Result {
						return env.Try("", "clone", "-q", n.HTTPURL(tok, w.repo), dir)
					}).OK() {
						if got := strings.TrimSpace(env.Try(dir, "rev-parse", "HEAD").Stdout); got != w.acked {
							w.ops = append(w.ops, rollOp{what: "clone-head", at: time.Now(), err: "clone HEAD " + got + ", acknowledged " + w.acked})
						}
					}
				}
				cycles.Add(1)
			}
		}()
	}
	waitCycles := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for cycles.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("clients completed only %d of %d cycles", cycles.Load(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCycles(int64(len(workers)))

	fleet := &Fleet{C: c, BeforeTerm: func(i int) { lb.TakeOut(c.Nodes[i]) }}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	start := time.Now()
	took, err := admin.Rollout(ctx, fleet, admin.RolloutOptions{Poll: 100 * time.Millisecond, Timeout: 30 * time.Second,
		Progress: func(m string) { t.Logf("%6.2fs rollout: %s", time.Since(start).Seconds(), m) }})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	waitCycles(cycles.Load() + int64(len(workers)))
	close(stop)
	wg.Wait()

	var failed []string
	perNode := map[string]int{}
	total := 0
	for _, w := range workers {
		for _, op := range w.ops {
			total++
			perNode[op.node]++
			if op.err != "" {
				failed = append(failed, fmt.Sprintf("%s %s via %s at +%.2fs: %s", w.repo, op.what, op.node, op.at.Sub(start).Seconds(), op.err))
			}
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d operations failed during the rollout:\n%s", len(failed), total, strings.Join(failed, "\n"))
	}
	for _, n := range c.Nodes {
		if perNode[n.Name] == 0 {
			t.Errorf("no operation went through %s", n.Name)
		}
	}
	// Every acknowledged push is there, read through every node.
	for _, w := range workers {
		for _, n := range c.Nodes {
			if got := env.Run(t, "", "ls-remote", n.HTTPURL(tok, w.repo), "refs/heads/main"); !strings.HasPrefix(got, w.acked) {
				t.Errorf("%s main via %s = %q, last acknowledged push %s", w.repo, n.Name, got, w.acked)
			}
		}
	}
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "fenced") {
			t.Errorf("%s logged fencing", n.Name)
		}
	}
	t.Logf("rollout op=rolling-restart nodes=%d seconds=%.2f client_ops=%d", len(c.Nodes), took.Seconds(), total)
	fmt.Printf("rollout op=rolling-restart nodes=%d seconds=%.2f client_ops=%d\n", len(c.Nodes), took.Seconds(), total)
}

// TestDrainPrewarmsSuccessor: a draining owner tells the node that takes
// its repository over to prewarm it, so the successor's cache holds the
// pack before any request reaches it.
func TestDrainPrewarmsSuccessor(t *testing.T) {
	c, env := startCluster(t)
	n0 := c.Nodes[0]
	tok := c.token(t, n0, "alice")
	repo := c.nonLeaderRepo("hint")
	c.mustAdmin(t, n0, "create-repo", repo)
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": strings.Repeat("payload\n", 1000)})
	env.Run(t, work, "push", "-q", c.Nodes[1].HTTPURL(tok, repo), "main")
	owner := c.waitOwner(t, n0, repo, "")
	if owner == n0 {
		t.Fatalf("%s landed on the leader; nonLeaderRepo should prevent that", repo)
	}
	var rest rc.LiveSet
	for _, n := range c.others(owner) {
		rest = append(rest, rc.NodeWeight{Node: n.Name, Weight: 1})
	}
	var next *Node
	for _, n := range c.Nodes {
		if n.Name == rc.Rendezvous(names.MustParse(repo), rest) {
			next = n
		}
	}
	if got := prewarmBytes(t, next); got != 0 {
		t.Fatalf("%s prewarmed %v bytes before the drain", next.Name, got)
	}
	if err := owner.Term(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for prewarmBytes(t, next) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not prewarm %s within 10s of %s's drain:\n%s", next.Name, repo, owner.Name, next.LogTail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prewarmBytes reads rgit_prewarm_bytes_total from n's /metrics.
func prewarmBytes(t *testing.T, n *Node) float64 {
	t.Helper()
	return metricValue(t, n, "rgit_prewarm_bytes_total")
}

// metricValue reads one series (name and labels as /metrics prints them)
// from n's /metrics.
func metricValue(t *testing.T, n *Node, series string) float64 {
	t.Helper()
	v, ok := gitenv.Metric(t, n.MetricsAddr, series)
	if !ok {
		t.Fatalf("%s exposes no %s", n.Name, series)
	}
	return v
}
