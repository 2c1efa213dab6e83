package multiproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/transport/product/admin"
)

// TestScaleOutIn: three of five nodes in the static map serve twenty
// repositories under pushes, fetches, ls-remote, compare-and-swap pushes
// and clones through a balancer of the live nodes. The other two start:
// within 60 s they own and serve at least 30% of the repositories (the
// leader's rebalancer moves warm ones to them; rendezvous placement puts
// 11 of the 20 there), with no operation failed and no acknowledged push
// lost. Then two of the original nodes leave, each out of the balancer
// first and then stopped with SIGTERM: again none failed, none lost. The
// history of reads and compare-and-swap pushes is linearizable
// throughout.
func TestScaleOutIn(t *testing.T) {
	const (
		repos    = 20
		minShare = 0.30
		within   = 60 * time.Second
	)
	c, env := startClusterWith(t, Options{Nodes: 5, Running: 3})
	l := startLoad(t, c, env, "scale", 3, repos)
	for w := range 2 {
		l.wg.Add(1)
		go l.clones(w, env.Scratch(t))
	}
	// Every repository is active, held by one of the three, before the
	// others start: what the new nodes get, they get by moves.
	for _, r := range l.repos {
		l.env.Run(t, "", "ls-remote", c.Nodes[0].HTTPURL(l.tok, r))
	}
	l.progress(t, 20)

	fresh := c.Nodes[3:]
	joined := time.Now()
	for _, n := range fresh {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range fresh {
		if err := n.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var share float64
	for {
		share = c.servedShare(t, fresh, l.repos)
		if share >= minShare {
			break
		}
		if time.Since(joined) > within {
			t.Fatalf("%.0f s after the new nodes started they serve %.2f of the repositories, want %.2f", within.Seconds(), share, minShare)
		}
		time.Sleep(250 * time.Millisecond)
	}
	reached := time.Since(joined)
	l.progress(t, 20) // the load runs on the new placement
	moves := map[string]float64{}
	for _, r := range []string{"started", "handed", "claimed", "abandoned"} {
		moves[r] = metricValue(t, c.Nodes[0], `rgit_rebalance_moves_total{result="`+r+`"}`)
	}
	if moves["handed"]+moves["claimed"] == 0 {
		t.Errorf("the leader moved no repository (rgit_rebalance_moves_total %v)", moves)
	}

	shareEnd := c.servedShare(t, fresh, l.repos)

	scaleIn := time.Now()
	for _, i := range []int{2, 1} {
		n := c.Nodes[i]
		l.lb.TakeOut(n) // the preStop sleep: in-flight requests finish
		if err := n.Term(20 * time.Second); err != nil {
			t.Errorf("scale-in: %v\n%s", err, n.LogTail(20))
		}
	}
	left := time.Since(scaleIn)
	l.progress(t, 20)
	ops := l.finish()
	lost := l.lostPushes(t, ops)
	l.checkHistory(t)

	phase := func(o op) string {
		if o.at.Before(scaleIn) {
			return "out"
		}
		return "in"
	}
	failed, lostIn, total := map[string][]string{}, map[string]int{}, map[string]int{}
	for _, o := range ops {
		total[phase(o)]++
		if !o.ok {
			failed[phase(o)] = append(failed[phase(o)], o.String())
		}
	}
	for _, o := range lost {
		lostIn[phase(o)]++
	}
	lines := []string{
		fmt.Sprintf("scale op=out nodes=3+2 repos=%d ops=%d failed=%d lost=%d share_new=%.2f seconds_to_share=%.1f share_end=%.2f moves=%.0f handed=%.0f claimed=%.0f abandoned=%.0f",
			repos, total["out"], len(failed["out"]), lostIn["out"], share, reached.Seconds(), shareEnd,
			moves["started"], moves["handed"], moves["claimed"], moves["abandoned"]),
		fmt.Sprintf("scale op=in nodes=5-2 ops=%d failed=%d lost=%d seconds_to_leave=%.1f",
			total["in"], len(failed["in"]), lostIn["in"], left.Seconds()),
	}
	for _, line := range lines {
		t.Log(line)
		fmt.Println(line)
	}
	for _, p := range []string{"out", "in"} {
		if len(failed[p]) > 0 {
			t.Errorf("scale %s: %d operations failed:\n%s", p, len(failed[p]), strings.Join(failed[p], "\n"))
		}
	}
	for _, n := range c.Nodes {
		var fenced []string
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "fenced") {
				fenced = append(fenced, line)
			}
		}
		if len(fenced) > 0 {
			t.Errorf("%s logged fencing: a move let a second writer open a repository:\n%s", n.Name, strings.Join(fenced, "\n"))
		}
	}
}

// clones clones random repositories through the balancer until the load
// stops.
func (l *load) clones(w int, dir string) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w), 73))
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		repo := l.repos[rng.IntN(len(l.repos))]
		n, done := l.lb.Pick()
		to := filepath.Join(dir, fmt.Sprint(i))
		r := l.env.Try("", "clone", "-q", n.HTTPURL(l.tok, repo), to)
		done()
		l.record(op{clone: true, node: n.Name, repo: repo, ok: r.OK(), msg: r.Stderr})
		os.RemoveAll(to)
	}
}

// servedShare is the fraction of repos that one of nodes holds open: it
// owns the repository's lease and a request has opened it there.
func (c *Cluster) servedShare(t *testing.T, nodes []*Node, repos []string) float64 {
	t.Helper()
	served := map[string]bool{}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := admin.Do(ctx, n.StreamAddr, c.TLS, c.Secret, admin.ShowStatus{}, nil)
		cancel()
		if err != nil {
			t.Fatalf("status of %s: %v", n.Name, err)
		}
		for _, repo := range r.(*admin.Status).OpenRepos {
			if slices.Contains(repos, repo) {
				served[repo] = true
			}
		}
	}
	return float64(len(served)) / float64(len(repos))
}
