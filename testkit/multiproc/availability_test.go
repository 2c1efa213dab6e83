package multiproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/linearize"
	"github.com/rgit/rgit/testkit/scale"
)

// op is one git operation of the load: a push of a new branch, or a fetch
// of a branch acknowledged before; or, on the repository's shared branch,
// a read (ls-remote) or a compare-and-swap push (--force-with-lease with
// the value last read), which fails only by not answering (a CAS refused
// as stale is an answer).
type op struct {
	push, clone  bool
	shared       string // "read" or "cas" on sharedRef; "" for the others
	node, repo   string
	branch, want string // the branch and the commit pushed (or expected)
	ok           bool
	msg          string
	at           time.Time
}

// load is a push-and-fetch loop of a few workers, each with its own
// local repository: every round pushes a new commit as a new branch to a
// random repository through the balancer, then fetches it back through
// another pick, then reads the repository's shared branch and
// compare-and-swaps it to the new commit through two more picks. It runs
// until stop. Every read and push goes into hist with its invocation and
// return time, for the linearizability check (checkHistory).
type load struct {
	hist  linearize.History
	c     *Cluster
	env   *gitenv.Env
	lb    *Balancer
	tok   string
	repos []string
	ok    atomic.Int64 // successful operations so far
	mu    sync.Mutex
	ops   []op
	wg    sync.WaitGroup
	stop  chan struct{}
}

// startLoad creates repos repositories alice/<prefix>-<i> and starts
// workers on them.
func startLoad(t *testing.T, c *Cluster, env *gitenv.Env, prefix string, workers, repos int) *load {
	t.Helper()
	l := &load{c: c, env: env, lb: NewBalancer(c.Nodes), tok: c.token(t, c.Nodes[0], "alice"), stop: make(chan struct{})}
	for i := range repos {
		r := fmt.Sprintf("alice/%s-%d", prefix, i)
		c.mustAdmin(t, c.Nodes[0], "create-repo", r)
		l.repos = append(l.repos, r)
	}
	for w := range workers {
		dir := env.Scratch(t)
		l.wg.Add(1)
		go l.work(w, dir)
	}
	return l
}

func (l *load) record(o op) {
	o.at = time.Now()
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
	if o.ok {
		l.ok.Add(1)
	}
}

func (l *load) work(w int, dir string) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w), 61))
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		branch := fmt.Sprintf("w%d-%d", w, i)
		if r := l.env.Try(dir, "commit", "-q", "--allow-empty", "-m", branch); !r.OK() {
			l.record(op{msg: "local commit: " + r.String()})
			return
		}
		sha := strings.TrimSpace(l.env.Try(dir, "rev-parse", "HEAD").Out())
		repo := l.repos[rng.IntN(len(l.repos))]
		n, done := l.lb.Pick()
		call := time.Now()
		r := l.env.Try(dir, "push", "-q", n.HTTPURL(l.tok, repo), "HEAD:refs/heads/"+branch)
		done()
		l.record(op{push: true, node: n.Name, repo: repo, branch: branch, want: sha, ok: r.OK(), msg: r.Stderr})
		l.cas(w, repo, "refs/heads/"+branch, "", sha, n.Name, call, r)
		if !r.OK() {
			continue
		}
		n, done = l.lb.Pick()
		call = time.Now()
		r = l.env.Try(dir, "fetch", "-q", n.HTTPURL(l.tok, repo), "refs/heads/"+branch)
		ret := time.Now()
		done()
		got := strings.TrimSpace(l.env.Try(dir, "rev-parse", "FETCH_HEAD").Out())
		ok := r.OK() && got == sha
		msg := r.Stderr
		if r.OK() && !ok {
			msg = fmt.Sprintf("fetched %s, pushed %s", got, sha)
		}
		l.record(op{node: n.Name, repo: repo, branch: branch, want: sha, ok: ok, msg: msg})
		if r.OK() {
			l.hist.Add(linearize.Op{Client: w, Key: repo + " refs/heads/" + branch, Kind: linearize.Read, Value: got, Call: call, Return: ret, Note: "fetch via " + n.Name})
		}
		l.shared(w, dir, repo, sha)
	}
}

// sharedRef is the branch of every repository that all workers read and
// compare-and-swap.
const sharedRef = "refs/heads/shared"

// shared reads repo's shared branch through one pick and swaps it from
// what it read to sha through another.
func (l *load) shared(w int, dir, repo, sha string) {
	n, done := l.lb.Pick()
	call := time.Now()
	r := l.env.Try(dir, "ls-remote", n.HTTPURL(l.tok, repo), sharedRef)
	ret := time.Now()
	done()
	l.record(op{shared: "read", node: n.Name, repo: repo, branch: "shared", ok: r.OK(), msg: r.Stderr})
	if !r.OK() {
		return
	}
	old, _, _ := strings.Cut(strings.TrimSpace(r.Out()), "\t")
	l.hist.Add(linearize.Op{Client: w, Key: repo + " " + sharedRef, Kind: linearize.Read, Value: old, Call: call, Return: ret, Note: "ls-remote via " + n.Name})
	n, done = l.lb.Pick()
	call = time.Now()
	r = l.env.Try(dir, "push", "-q", "--force-with-lease="+sharedRef+":"+old, n.HTTPURL(l.tok, repo), "HEAD:"+sharedRef)
	done()
	stale := staleLease(r)
	l.record(op{shared: "cas", push: true, node: n.Name, repo: repo, branch: "shared", ok: r.OK() || stale, msg: r.Stderr})
	l.cas(w, repo, sharedRef, old, sha, n.Name, call, r)
}

// staleLease reports a push refused because the ref was not at the value
// its lease named: git's own check against the advertisement ("stale
// info"), or the server's ("fetch first", "failed to update ref").
func staleLease(r gitenv.Result) bool {
	return !r.OK() && (strings.Contains(r.Stderr, "stale info") || strings.Contains(r.Stderr, "fetch first") || strings.Contains(r.Stderr, "failed to update ref"))
}

// cas records a push of ref from old to sha ("": absent) that returned r.
func (l *load) cas(w int, repo, ref, old, sha, node string, call time.Time, r gitenv.Result) {
	o := linearize.Op{Client: w, Key: repo + " " + ref, Kind: linearize.CAS, Old: old, New: sha, Call: call, Return: time.Now(), Note: "push via " + node}
	switch {
	case r.OK():
		o.Outcome = linearize.OK
	case staleLease(r):
		o.Outcome = linearize.Rejected
	default:
		o.Outcome, o.Note = linearize.Unknown, o.Note+": "+strings.TrimSpace(r.Stderr)
	}
	l.hist.Add(o)
}

// heads lists every repository's branches through node 0.
func (l *load) heads(t *testing.T) map[string]map[string]string {
	t.Helper()
	heads := map[string]map[string]string{}
	for _, r := range l.repos {
		heads[r] = ParseLsRemote(l.env.Run(t, "", "ls-remote", l.c.Nodes[0].HTTPURL(l.tok, r), "refs/heads/*"))
	}
	return heads
}

// checkHistory adds the final state of every register, read through
// node 0 once the load has stopped, and checks the history for
// linearizability; a failure prints the shortest non-linearizable part
// and the path of porcupine's visualization (kept after the test).
func (l *load) checkHistory(t *testing.T) {
	t.Helper()
	keys := map[string]bool{}
	for _, o := range l.hist.Ops() {
		keys[o.Key] = true
	}
	call := time.Now()
	final := l.heads(t)
	ret := time.Now()
	for k := range keys {
		repo, ref, _ := strings.Cut(k, " ")
		l.hist.Add(linearize.Op{Client: 99, Key: k, Kind: linearize.Read, Value: final[repo][ref], Call: call, Return: ret, Note: "final ls-remote"})
	}
	dir, err := os.MkdirTemp("", "rgit-linearize-")
	if err != nil {
		t.Fatal(err)
	}
	if linearize.Report(t, &l.hist, dir, 5*time.Minute).OK {
		os.RemoveAll(dir)
	}
}

// stallLimit is how long the load may go without a successful operation:
// a request may wait RGIT_LEADER_WAIT_SECS (30 s) for a restarting
// leader, plus a loaded machine's slowness.
const stallLimit = 60 * time.Second

// progress waits until n more operations have succeeded, failing if none
// succeeds for stallLimit.
func (l *load) progress(t *testing.T, n int64) {
	t.Helper()
	target := l.ok.Load() + n
	last, lastAt := l.ok.Load(), time.Now()
	for cur := last; cur < target; cur = l.ok.Load() {
		if cur != last {
			last, lastAt = cur, time.Now()
		}
		if time.Since(lastAt) > stallLimit {
			t.Fatalf("the load made no progress for %s (%d of %d operations)", stallLimit, cur, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish stops the workers and returns every operation.
func (l *load) finish() []op {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// tally counts pushes and fetches of new branches, how many of each
// succeeded, and every failed operation (those on the shared branch too).
func tally(ops []op) (pushes, acked, fetches, fetched int, failed []string) {
	for _, o := range ops {
		switch {
		case o.shared != "":
		case o.push:
			pushes++
			if o.ok {
				acked++
			}
		default:
			fetches++
			if o.ok {
				fetched++
			}
		}
		if !o.ok {
			failed = append(failed, o.String())
		}
	}
	return pushes, acked, fetches, fetched, failed
}

// what names the operation's kind.
func (o op) what() string {
	switch {
	case o.shared != "":
		return o.shared + " of the shared branch"
	case o.push:
		return "push"
	case o.clone:
		return "clone"
	}
	return "fetch"
}

func (o op) String() string {
	return fmt.Sprintf("%s %s via %s at %s: %s", o.what(), o.repo, o.node, o.at.Format("15:04:05.000"), strings.TrimSpace(o.msg))
}

// checkAcked verifies every acknowledged push: its branch names its
// commit in the repository now. It returns how many were lost.
func (l *load) checkAcked(t *testing.T, ops []op) int { return len(l.lostPushes(t, ops)) }

// lostPushes returns the acknowledged pushes whose branch does not name
// their commit in the repository now, reporting each as an error.
func (l *load) lostPushes(t *testing.T, ops []op) []op {
	t.Helper()
	heads := l.heads(t)
	var acked []Ack
	pushes := map[Ack]op{}
	for _, o := range ops {
		if o.push && o.shared == "" && o.ok {
			a := Ack{Repo: o.repo, Ref: "refs/heads/" + o.branch, Want: o.want, Node: o.node}
			acked = append(acked, a)
			pushes[a] = o
		}
	}
	var lost []op
	for _, a := range Lost(acked, heads) {
		t.Errorf("acknowledged push of %s to %s (via %s) lost: the server has %q", a.Ref, a.Repo, a.Node, heads[a.Repo][a.Ref])
		lost = append(lost, pushes[a])
	}
	return lost
}

// TestClusterRollingRestartNoFailures: full rolling restarts (ordinals 2,
// 1, 0; RGIT_MULTIPROC_ROUNDS, default 2) under a push-and-fetch loop
// routed like a load balancer, each node taken out of rotation 1 s before
// its SIGTERM (a preStop sleep): no operation fails, every node exits
// cleanly, nothing acknowledged is lost, and the history of reads and
// compare-and-swap pushes is linearizable. The leader's restart is covered
// by its hand-over and by claims waiting out its absence.
func TestClusterRollingRestartNoFailures(t *testing.T) {
	c, env := startCluster(t)
	rounds := scale.Count(t, "RGIT_MULTIPROC_ROUNDS", 2)
	l := startLoad(t, c, env, "avail", 3, 6)
	l.progress(t, 10)
	for round := range rounds {
		for _, i := range []int{2, 1, 0} {
			n := c.Nodes[i]
			l.lb.TakeOut(n) // the preStop sleep: in-flight requests finish
			if err := n.Term(20 * time.Second); err != nil {
				t.Errorf("round %d: %v\n%s", round, err, n.LogTail(20))
			}
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			if err := n.WaitReady(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.progress(t, 6)
		}
	}
	ops := l.finish()
	pushes, acked, fetches, fetched, failed := tally(ops)
	lost := l.checkAcked(t, ops)
	l.checkHistory(t)
	line := fmt.Sprintf("availability op=rolling-restart rounds=%d pushes=%d acked=%d fetches=%d ok=%d failed=%d lost=%d",
		rounds, pushes, acked, fetches, fetched, len(failed), lost)
	t.Log(line)
	fmt.Println(line)
	if len(failed) > 0 {
		t.Errorf("%d operations failed during the rolling restarts:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// TestClusterKillNineAvailability: repeated kill -9 of random nodes, the
// leader included (RGIT_MULTIPROC_KILLS, default 6; RGIT_MULTIPROC_OPS
// successful operations between kills, default 50), under the same loop,
// requests routed to live nodes only (a node leaves the rotation, and its
// clients' operations finish, before it is killed; it rejoins once
// restarted and ready). No acknowledged push is lost, the history of
// reads and compare-and-swap pushes is linearizable, and the only
// operations that fail are pushes another node was forwarding to the
// killed owner, their body partly sent (they fail cleanly, never half
// applied): a request that meets a dead owner before sending anything is
// served at the new owner. The leader has no failover, so each killed
// node is restarted at once (as an orchestrator would). A kill cuts at
// most the pushes in flight to the killed owner, one per worker, so at
// most workers pushes per kill may fail, and no other operation. (A rate
// bar cannot say this: one cut push in the ~160 pushes of the default run
// is 0.994, and any run without a cut is 1.)
func TestClusterKillNineAvailability(t *testing.T) {
	const workers = 3
	c, env := startCluster(t)
	kills := scale.Count(t, "RGIT_MULTIPROC_KILLS", 6)
	perKill := scale.Count(t, "RGIT_MULTIPROC_OPS", 100)
	l := startLoad(t, c, env, "avail", workers, 6)
	rng := rand.New(rand.NewPCG(2, 2)) // kills rgit-0, -2, -1, -1, -0, -2
	l.progress(t, 10)
	var victims []string
	var killed []time.Time
	for range kills {
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		victims = append(victims, n.Name)
		l.lb.TakeOut(n)
		killed = append(killed, time.Now())
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		// Restarted at once, as an orchestrator restarts a crashed
		// process: while it is down, requests forwarded to it move its
		// repositories (or, for the leader, claims wait for it).
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		if err := n.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.progress(t, int64(perKill))
	}
	ops := l.finish()
	pushes, acked, fetches, fetched, failed := tally(ops)
	lost := l.checkAcked(t, ops)
	l.checkHistory(t)
	line := fmt.Sprintf("availability op=kill9 kills=%d victims=%s pushes=%d acked=%d acked_rate=%.4f fetches=%d ok=%d lost=%d",
		kills, strings.Join(victims, ","), pushes, acked, float64(acked)/float64(pushes), fetches, fetched, lost)
	t.Log(line)
	fmt.Println(line)
	if len(failed) > 0 {
		t.Logf("failed operations:\n%s", strings.Join(failed, "\n"))
	}
	if pushes == 0 {
		t.Error("no push was tallied")
	}
	cut := 0
	for _, o := range ops {
		switch {
		case o.ok:
		case cutAtKill(o, killed):
			cut++
		default:
			t.Errorf("%s of %s via %s failed, not a push cut by a kill: %s", map[bool]string{true: "push", false: "fetch"}[o.push], o.repo, o.node, o.msg)
		}
	}
	if cut > kills*workers {
		t.Errorf("%d pushes cut by %d kills, want at most %d (one in flight per worker)", cut, kills, kills*workers)
	}
}

// cutAtKill reports whether o is a push the killed owner was serving: it
// failed mid-stream and ended just after a kill. Where the stream broke
// decides what git says: the entry node's 502 (before the owner answered),
// the remote hanging up (while the owner read the body), or curl 18 (the
// owner's answer was being relayed, its status already sent).
func cutAtKill(o op, killed []time.Time) bool {
	midStream := false
	for _, m := range []string{"502", "unexpected disconnect", "curl 18 transfer closed with outstanding read data remaining"} {
		midStream = midStream || strings.Contains(o.msg, m)
	}
	if !o.push || !midStream {
		return false
	}
	for _, k := range killed {
		if !o.at.Before(k) && o.at.Sub(k) < 2*time.Second {
			return true
		}
	}
	return false
}
