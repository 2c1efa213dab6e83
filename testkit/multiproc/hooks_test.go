package multiproc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/hookrecv"
	"github.com/rgit/rgit/testkit/scale"
	"github.com/rgit/rgit/transport/product/hooks"
)

// update is one push of the loop: the ref's value before and after.
type update struct{ before, after string }

// hookPusher fast-forwards one branch in a loop through the balancer,
// one commit a push, and records which pushes were acknowledged.
type hookPusher struct {
	env   *gitenv.Env
	lb    *Balancer
	tok   string
	repo  string
	dir   string
	acked atomic.Int64
	stop  chan struct{}
	done  chan struct{}

	mu        sync.Mutex
	ackedUps  []update
	unacked   []string // commits whose push failed
	lastError string
}

func (p *hookPusher) run() {
	defer close(p.done)
	tip := ""
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		if r := p.env.Try(p.dir, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("push ", i)); !r.OK() {
			p.fail("local commit: " + r.String())
			return
		}
		sha := strings.TrimSpace(p.env.Try(p.dir, "rev-parse", "HEAD").Out())
		n, done := p.lb.Pick()
		r := p.env.Try(p.dir, "push", "-q", n.HTTPURL(p.tok, p.repo), "HEAD:refs/heads/main")
		done()
		p.mu.Lock()
		if r.OK() {
			p.ackedUps = append(p.ackedUps, update{before: tip, after: sha})
			p.acked.Add(1)
			tip = sha
		} else {
			p.unacked = append(p.unacked, sha)
			p.lastError = r.Stderr
		}
		p.mu.Unlock()
		if r.OK() {
			continue
		}
		// Unacknowledged: it may have landed or not. Go on from what the
		// repository has now.
		for {
			n, done := p.lb.Pick()
			out := p.env.Try("", "ls-remote", n.HTTPURL(p.tok, p.repo), "refs/heads/main")
			done()
			if out.OK() {
				tip, _, _ = strings.Cut(strings.TrimSpace(out.Out()), "\t")
				break
			}
		}
		reset := tip
		if reset == "" {
			reset = "HEAD~1"
		}
		if r := p.env.Try(p.dir, "reset", "-q", "--hard", reset); !r.OK() {
			p.fail("reset to " + reset + ": " + r.String())
			return
		}
	}
}

func (p *hookPusher) fail(msg string) {
	p.mu.Lock()
	p.lastError = msg
	p.mu.Unlock()
}

// progress waits until n more pushes were acknowledged.
func (p *hookPusher) progress(t *testing.T, n int64) {
	t.Helper()
	target := p.acked.Load() + n
	deadline := time.Now().Add(60 * time.Second)
	for p.acked.Load() < target {
		if time.Now().After(deadline) {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("pushes made no progress for 60s (%d of %d acknowledged); last error: %s", p.acked.Load(), target, p.lastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterWebhooksAtLeastOnce: three nodes, a push loop on one branch
// through all of them, the repository's owner killed with SIGKILL twice
// (restarted at once) and then a rolling restart: every acknowledged
// push's event is delivered at least once, no event names an update that
// did not land (a push that failed and was not applied), and the events of
// the branch arrive in the order of its history.
func TestClusterWebhooksAtLeastOnce(t *testing.T) {
	const secret = "cluster-hook-secret-0123456789"
	c, env := startCluster(t, "RGIT_HOOK_ALLOW=127.0.0.0/8", "RGIT_HOOK_BACKOFF_MS=100", "RGIT_HOOK_TIMEOUT_SECS=2")
	perPhase := int64(scale.Count(t, "RGIT_MULTIPROC_OPS", 15))
	rcv, err := hookrecv.Start(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	repo := c.nonLeaderRepo("hooks")
	c.mustAdmin(t, c.Nodes[0], "create-repo", repo)
	c.mustAdmin(t, c.Nodes[2], "add-hook", repo, rcv.URL, "--secret", secret, "--events", "push")
	dir := env.Scratch(t)
	p := &hookPusher{env: env, lb: NewBalancer(c.Nodes), tok: c.token(t, c.Nodes[0], "alice"), repo: repo, dir: dir,
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	defer func() {
		select {
		case <-p.stop:
		default:
			close(p.stop)
		}
		<-p.done
	}()

	start := time.Now()
	p.progress(t, perPhase)
	t.Logf("%v: %d pushes acknowledged", time.Since(start).Round(time.Millisecond), p.acked.Load())
	var victims []string
	for range 2 {
		owner := c.waitOwner(t, c.Nodes[0], repo, "")
		victims = append(victims, owner.Name)
		if err := owner.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		if err := owner.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.progress(t, perPhase)
		t.Logf("%v: killed owner %s, %d pushes acknowledged", time.Since(start).Round(time.Millisecond), owner.Name, p.acked.Load())
	}
	for _, i := range []int{2, 1, 0} {
		n := c.Nodes[i]
		p.lb.TakeOut(n)
		if err := n.Term(20 * time.Second); err != nil {
			t.Errorf("rolling restart: %v\n%s", err, n.LogTail(20))
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		if err := n.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.progress(t, perPhase/3+1)
		t.Logf("%v: restarted %s, %d pushes acknowledged", time.Since(start).Round(time.Millisecond), n.Name, p.acked.Load())
	}
	close(p.stop)
	<-p.done

	// The branch's history as the repository has it: each landed update
	// is one first-parent step.
	tip := strings.Fields(env.Run(t, "", "ls-remote", c.Nodes[0].HTTPURL(p.tok, repo), "refs/heads/main"))[0]
	chain := strings.Fields(env.Run(t, dir, "rev-list", "--first-parent", "--reverse", tip))
	pos := map[string]int{}
	for i, sha := range chain {
		pos[sha] = i + 1
	}
	want := map[string]bool{} // acknowledged pushes' new values
	for _, u := range p.ackedUps {
		want[u.after] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := func() map[string]bool {
		got := map[string]bool{}
		for _, d := range rcv.Received() {
			var pl hooks.Payload
			if d.Decode(&pl) == nil {
				got[pl.After] = true
			}
		}
		return got
	}
	_, waitErr := rcv.Wait(ctx, func([]hookrecv.Delivery) bool {
		got := seen()
		for a := range want {
			if !got[a] {
				return false
			}
		}
		return true
	})

	t.Logf("%v: waited for the deliveries", time.Since(start).Round(time.Millisecond))
	got := rcv.Received()
	firstAt := map[string]bool{}
	var missing, duplicates, phantom, ambiguous, badSig, outOfOrder, lastPos int
	byAfter := map[string]hooks.Payload{}
	for _, d := range got {
		if !d.SignatureOK {
			badSig++
		}
		if firstAt[d.ID] {
			duplicates++
			continue
		}
		firstAt[d.ID] = true
		var pl hooks.Payload
		if err := d.Decode(&pl); err != nil {
			t.Fatalf("delivery %s: %v", d.ID, err)
		}
		byAfter[pl.After] = pl
		if pl.Pusher == nil || pl.Pusher.User != "alice" || pl.Pusher.TokenID == "" {
			t.Errorf("event %s names pusher %+v, want alice's token (forwarded pushes too)", d.ID, pl.Pusher)
		}
		i, landed := pos[pl.After]
		switch {
		case !landed:
			phantom++
			t.Errorf("event %s names %s → %s, which never landed", d.ID, pl.Before, pl.After)
		case i <= lastPos:
			outOfOrder++
			t.Errorf("event %s (history position %d) arrived after the event of position %d", d.ID, i, lastPos)
		}
		lastPos = max(lastPos, i)
	}
	for _, u := range p.ackedUps {
		pl, ok := byAfter[u.after]
		switch {
		case !ok:
			missing++
		case pl.Before != u.before && !(u.before == "" && pl.Before == strings.Repeat("0", 40)):
			t.Errorf("event of %s says before %s, the push had %s", u.after, pl.Before, u.before)
		}
	}
	for _, sha := range p.unacked {
		if _, ok := byAfter[sha]; ok {
			ambiguous++ // failed for the client, yet applied: its event is right
		}
	}
	line := fmt.Sprintf("hooks pushes_acked=%d events_delivered=%d missing=%d duplicates=%d unacked=%d unacked_applied=%d phantom=%d out_of_order=%d victims=%s",
		len(p.ackedUps), len(firstAt), missing, duplicates, len(p.unacked), ambiguous, phantom, outOfOrder, strings.Join(victims, ","))
	t.Log(line)
	fmt.Println(line)
	if missing > 0 || waitErr != nil {
		t.Errorf("%d acknowledged pushes have no event (%v)", missing, waitErr)
	}
	if badSig > 0 {
		t.Errorf("%d deliveries with a bad signature", badSig)
	}
}
