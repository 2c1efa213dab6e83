package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/multiproc"
	"github.com/rgit/rgit/testkit/s3local"
)

// runSoak runs three real nodes (testkit/multiproc) on versitygw, with
// api-serve and Redis for the read API, under a steady mixed load through
// a balancer of the ready nodes (pushes of new branches, fetches of
// pushed branches, clones, ls-remote, read API GETs) for -duration, and
// injects one fault each -interval in rotation (planFault): kill -9 of a
// follower, SIGTERM of a follower (out of rotation first, as Kubernetes
// does), the store hanging for -hang (versitygw stopped with SIGSTOP),
// and a restart (SIGTERM) of the leader the cluster names. Each interval
// ends in one line:
//
//	soak minute=<m> fault=<kind>:<node> fault_s=<s> ops=<n> errors=<n> fault_errors=<n> p99_ms=push:<ms>,fetch:<ms>,clone:<ms>,ls-remote:<ms>,api:<ms> <node>=rss_mb:<MB>,fds:<n>,goroutines:<n>,repos:<n> …
//
// errors are failed operations outside every fault window (a fault's
// start to its end, the node ready again or the store back, plus
// -grace); fault_errors those overlapping one, a request cut by a kill
// or refused during the hang. The node figures are the interval's last
// sample (/proc for RSS and open files, /metrics for go_goroutines and
// rgit_open_repos). The run ends in
//
//	soak verdict=pass|fail minutes=<m> ops=<n> errors=<n> fault_errors=<n> error_rate=<errors/ops> fault_error_rate=<fault_errors/ops> acked=<n> lost=<n> <node>=span_s:<s>,repos:<n>,rss:<x>,fds:<x>,goroutines:<x>,flat=true|false|short …
//
// lost counts acknowledged pushes whose branch does not name the pushed
// commit in the final refs (read through rgit-0 once the load stopped);
// the per-node ratios are the last quarter's floor over the first
// quarter's in the node's longest stretch of one process with the same
// repositories open, its first -settle left out (flatness; short: the
// stretch was under a minute, not judged). The verdict
// passes with 0 errors, 0 lost, every fault carried out and every node
// within 1.2×; otherwise the command fails and keeps the nodes' logs.
// A node not running at the end of an interval (no fault holds it down
// then) ends the run with an error.
func runSoak(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	var o soakOptions
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.DurationVar(&o.duration, "duration", 20*time.Minute, "how long the load runs")
	fs.DurationVar(&o.interval, "interval", time.Minute, "one fault and one line per interval")
	fs.DurationVar(&o.hang, "hang", 20*time.Second, "how long the store hangs in a hang fault")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "after a fault ends, failures still count as the fault's")
	fs.DurationVar(&o.sample, "sample", 2*time.Second, "how often each node's resources are read")
	fs.DurationVar(&o.settle, "settle", 20*time.Second, "the first samples of a stretch (one process, the same repositories open) left out of the flatness check")
	fs.DurationVar(&o.opTimeout, "op-timeout", time.Minute, "an operation taking longer is an error")
	fs.IntVar(&o.repos, "repos", 8, "repositories the load spreads over")
	fs.Parse(args)
	if o.duration < o.interval || o.interval <= 0 || o.repos < 1 {
		return errors.New("soak: -duration must be at least one -interval, and -repos positive")
	}
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "rgit-bench-soak-")
	if err != nil {
		return err
	}
	// The nodes' logs stay for a run that fails.
	keep := false
	defer func() {
		if keep {
			fmt.Fprintf(os.Stderr, "soak: logs kept under %s\n", work)
		} else {
			os.RemoveAll(work)
		}
	}()
	s3srv, err := startS3(work)
	if err != nil {
		return err
	}
	defer s3srv.Close()
	redisURL, stopRedis, err := startRedis(work)
	if err != nil {
		return err
	}
	defer stopRedis()
	env := append(s3srv.Env(), "RGIT_REDIS_URL="+redisURL)
	cl, err := multiproc.Start(ctx, multiproc.Options{Bin: bin, Dir: work, Nodes: 3, StoreURL: "s3://" + s3srv.Bucket + "/soak", Env: env})
	if err != nil {
		return err
	}
	defer cl.Stop()
	s := &soak{o: o, cl: cl, s3: s3srv, lb: multiproc.NewBalancer(cl.Nodes), work: work,
		git:  gitrun.Env{Home: filepath.Join(work, "home"), Ident: gitrun.Fixed("Soak", "soak@example.com", "1700000000 +0000")},
		http: &http.Client{Timeout: o.opTimeout}}
	if err := s.setup(ctx); err != nil {
		return err
	}
	api, err := cl.StartAPIServe(ctx, bin, cl.Nodes[2], env...)
	if err != nil {
		return err
	}
	defer api.Stop()
	s.apiAddr = api.Addr
	fmt.Fprintf(os.Stderr, "soak: 3 nodes on versitygw, api-serve and Redis, %d repositories, %s, a fault every %s\n",
		o.repos, o.duration, o.interval)
	verdict, err := s.run(ctx)
	if err != nil {
		keep = true
		return err
	}
	fmt.Println(verdict.line())
	if !verdict.pass {
		keep = true
		return errors.New("soak: the verdict failed")
	}
	return nil
}

type soakOptions struct {
	duration, interval, hang, grace, sample, settle, opTimeout time.Duration
	repos                                                      int
}

// soakOp is one kind of client operation of the soak's load.
type soakOp int

const (
	soakPush soakOp = iota
	soakFetch
	soakClone
	soakLsRemote
	soakAPI
	numSoakOps
)

var soakOpNames = [numSoakOps]string{"push", "fetch", "clone", "ls-remote", "api"}

func (o soakOp) String() string { return soakOpNames[o] }

// soakWorkers is how many clients run each operation: pushes are what
// must not be lost, so they get two.
var soakWorkers = [numSoakOps]int{2, 1, 1, 1, 1}

// soakRecord is one finished operation.
type soakRecord struct {
	op         soakOp
	start, end time.Time
	err        error
	node       string
}

// faultKind is one kind of fault of the rotation.
type faultKind int

const (
	faultKill9 faultKind = iota
	faultTerm
	faultHang
	faultLeader
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"kill9", "term", "hang", "leader-restart"}

func (k faultKind) String() string { return faultNames[k] }

// faultPlan is one fault: its kind and the node it hits ("" for the
// store).
type faultPlan struct {
	kind   faultKind
	target string
}

func (p faultPlan) String() string {
	if p.target == "" {
		return p.kind.String() + ":store"
	}
	return p.kind.String() + ":" + p.target
}

// planFault is fault i of the rotation (kill -9, SIGTERM, store hang,
// leader restart) over nodes led by leader: kill -9 and SIGTERM go to the
// followers in turn, round after round, so that each follower meets both.
func planFault(i int, nodes []string, leader string) faultPlan {
	kind := faultKind(i % int(numFaultKinds))
	var followers []string
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	if len(followers) == 0 {
		followers = []string{leader}
	}
	round := i / int(numFaultKinds)
	switch kind {
	case faultKill9:
		return faultPlan{kind, followers[round%len(followers)]}
	case faultTerm:
		return faultPlan{kind, followers[(round+1)%len(followers)]}
	case faultLeader:
		return faultPlan{kind, leader}
	}
	return faultPlan{kind: kind}
}

// faultWindow is when a fault was on: from its start until the node was
// ready again or the store answered.
type faultWindow struct{ begin, end time.Time }

// inFault reports whether an operation running from start to end
// overlapped a window, each extended by grace after its end.
func inFault(start, end time.Time, windows []faultWindow, grace time.Duration) bool {
	for _, w := range windows {
		if !end.Before(w.begin) && !start.After(w.end.Add(grace)) {
			return true
		}
	}
	return false
}

// soakTally is what a span of operations came to.
type soakTally struct {
	ops, errors, faultErrors int
	p99                      [numSoakOps]time.Duration // of the successful ones
}

// tallySoak counts the operations that ended in [from, to).
func tallySoak(recs []soakRecord, windows []faultWindow, grace time.Duration, from, to time.Time) soakTally {
	var t soakTally
	var lat [numSoakOps][]time.Duration
	for _, r := range recs {
		if r.end.Before(from) || !r.end.Before(to) {
			continue
		}
		t.ops++
		switch {
		case r.err == nil:
			lat[r.op] = append(lat[r.op], r.end.Sub(r.start))
		case inFault(r.start, r.end, windows, grace):
			t.faultErrors++
		default:
			t.errors++
		}
	}
	for op := range lat {
		slices.Sort(lat[op])
		t.p99[op] = percentile(lat[op], 99)
	}
	return t
}

// resSample is one reading of a node's resources.
type resSample struct {
	node       string
	pid        int
	at         time.Time
	rssKB      int64
	fds        int
	goroutines int
	repos      int // repositories open (rgit_open_repos): the working set
}

// nodeFlat is a node's resources over its longest stretch: the last
// quarter's floor over the first quarter's.
type nodeFlat struct {
	node                string
	span                time.Duration // of the samples compared
	repos               int           // open throughout
	rss, fds, goroutine float64
	judged              bool // the stretch was long enough
	flat                bool
}

// minStretch is the shortest stretch flatness judges: in less, a
// quarter is a few samples of whatever the load was doing.
const minStretch = time.Minute

// flatness compares, per node, the floors (minimum samples) of the first
// and the last quarter of its longest stretch: the samples of one process (a node
// restarted by a fault is measured from that restart) with the same
// repositories open, without the stretch's first settle (caches filling).
// The working set is held still because the soak moves it by design: a
// node gains the repositories of every node killed or stopped while it
// runs, each with its open files and goroutines, which is no leak; a
// leak grows with the operations, which go on within a stretch. The
// floor is what the node holds between the requests in flight (and RSS
// after a collection): a leak raises it, a burst of requests at a
// sample does not (with a few dozen goroutines and open files, two
// requests in flight are 1.2×). A
// stretch shorter than minStretch after settle is too short to judge
// and counts as flat.
func flatness(samples []resSample, settle time.Duration, limit float64) []nodeFlat {
	type life struct {
		node       string
		pid, repos int
		ss         []resSample
	}
	var lives []*life
	cur := map[string]*life{}
	for _, s := range samples {
		l := cur[s.node]
		if l == nil || l.pid != s.pid || l.repos != s.repos {
			l = &life{node: s.node, pid: s.pid, repos: s.repos}
			cur[s.node] = l
			lives = append(lives, l)
		}
		l.ss = append(l.ss, s)
	}
	best := map[string][]resSample{}
	var order []string
	for _, l := range lives {
		first := l.ss[0].at
		var kept []resSample
		for _, s := range l.ss {
			if s.at.Sub(first) >= settle {
				kept = append(kept, s)
			}
		}
		if _, seen := best[l.node]; !seen {
			order = append(order, l.node)
			best[l.node] = nil
		}
		if len(kept) > 0 && (len(best[l.node]) == 0 || span(kept) > span(best[l.node])) {
			best[l.node] = kept
		}
	}
	var out []nodeFlat
	for _, n := range order {
		ss := best[n]
		f := nodeFlat{node: n, rss: 1, fds: 1, goroutine: 1, flat: true}
		if len(ss) > 0 {
			f.span, f.repos = span(ss), ss[0].repos
		}
		if f.span >= minStretch && len(ss) >= 4 {
			f.judged = true
			q := len(ss) / 4
			head, tail := ss[:q], ss[len(ss)-q:]
			ratio := func(v func(resSample) float64) float64 {
				return floorOf(tail, v) / max(floorOf(head, v), 1)
			}
			f.rss = ratio(func(s resSample) float64 { return float64(s.rssKB) })
			f.fds = ratio(func(s resSample) float64 { return float64(s.fds) })
			f.goroutine = ratio(func(s resSample) float64 { return float64(s.goroutines) })
			f.flat = f.rss <= limit && f.fds <= limit && f.goroutine <= limit
		}
		out = append(out, f)
	}
	return out
}

func span(ss []resSample) time.Duration { return ss[len(ss)-1].at.Sub(ss[0].at) }

func floorOf(ss []resSample, v func(resSample) float64) float64 {
	low := v(ss[0])
	for _, s := range ss[1:] {
		low = min(low, v(s))
	}
	return low
}

// soakVerdict is the run's outcome.
type soakVerdict struct {
	minutes      int
	all          soakTally
	acked, lost  int
	nodes        []nodeFlat
	faultFailed  int // faults that did not go as planned (a node that did not exit cleanly on SIGTERM)
	pass         bool
	errorRate    float64
	faultErrRate float64
}

// flatLimit is how much a node's resources may grow from the first
// quarter of its life to the last.
const flatLimit = 1.2

// judgeSoak decides the verdict: no error outside the fault windows, no
// acknowledged push lost, every fault carried out, every node flat.
func judgeSoak(minutes int, all soakTally, acked, lost, faultFailed int, nodes []nodeFlat) soakVerdict {
	v := soakVerdict{minutes: minutes, all: all, acked: acked, lost: lost, nodes: nodes, faultFailed: faultFailed}
	v.pass = all.errors == 0 && lost == 0 && faultFailed == 0 && all.ops > 0 && acked > 0
	for _, n := range nodes {
		v.pass = v.pass && n.flat
	}
	if all.ops > 0 {
		v.errorRate = float64(all.errors) / float64(all.ops)
		v.faultErrRate = float64(all.faultErrors) / float64(all.ops)
	}
	return v
}

func (v soakVerdict) line() string {
	res := map[bool]string{true: "pass", false: "fail"}[v.pass]
	var b strings.Builder
	fmt.Fprintf(&b, "soak verdict=%s minutes=%d ops=%d errors=%d fault_errors=%d error_rate=%.4f fault_error_rate=%.4f acked=%d lost=%d",
		res, v.minutes, v.all.ops, v.all.errors, v.all.faultErrors, v.errorRate, v.faultErrRate, v.acked, v.lost)
	if v.faultFailed > 0 {
		fmt.Fprintf(&b, " faults_failed=%d", v.faultFailed)
	}
	for _, n := range v.nodes {
		flat := strconv.FormatBool(n.flat)
		if !n.judged {
			flat = "short"
		}
		fmt.Fprintf(&b, " %s=span_s:%.0f,repos:%d,rss:%.2f,fds:%.2f,goroutines:%.2f,flat=%s", n.node, n.span.Seconds(), n.repos, n.rss, n.fds, n.goroutine, flat)
	}
	return b.String()
}

// soak is one run's state.
type soak struct {
	o       soakOptions
	cl      *multiproc.Cluster
	s3      *s3local.Server
	lb      *multiproc.Balancer
	git     gitrun.Env
	http    *http.Client
	work    string
	token   string
	repos   []string
	seed    string // the repository every one starts as
	tip     string // its main, every repository's
	apiAddr string

	mu      sync.Mutex
	recs    []soakRecord
	acked   []multiproc.Ack
	windows []faultWindow
	samples []resSample
}

// setup makes the token, the repositories (public, for the read API)
// and their first commit, pushed through each node in turn so that the
// owners are spread.
func (s *soak) setup(ctx context.Context) error {
	n0 := s.cl.Nodes[0]
	out, err := s.cl.Admin(ctx, n0, "add-token", benchOwner)
	if err != nil {
		return fmt.Errorf("add-token: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.token = strings.TrimSpace(lines[len(lines)-1])
	if err := os.MkdirAll(s.git.Home, 0o755); err != nil {
		return err
	}
	s.seed = filepath.Join(s.work, "seed")
	if err := seedRepo(ctx, s.git, s.seed); err != nil {
		return err
	}
	tip, err := s.git.Output(ctx, s.seed, nil, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	s.tip = strings.TrimSpace(string(tip))
	for i := range s.o.repos {
		r := fmt.Sprintf("soak-%02d", i)
		for _, cmd := range [][]string{{"create-repo", benchOwner + "/" + r}, {"set-visibility", benchOwner + "/" + r, "public"}} {
			if _, err := s.cl.Admin(ctx, n0, cmd[0], cmd[1:]...); err != nil {
				return fmt.Errorf("%s %s: %w", cmd[0], r, err)
			}
		}
		n := s.cl.Nodes[i%len(s.cl.Nodes)]
		if _, err := s.git.Output(ctx, s.seed, nil, "push", "-q", n.HTTPURL(s.token, benchOwner+"/"+r), "main"); err != nil {
			return err
		}
		s.repos = append(s.repos, benchOwner+"/"+r)
	}
	return nil
}

// run loads the cluster for the duration with a fault each interval,
// prints the interval lines and returns the verdict.
func (s *soak) run(ctx context.Context) (soakVerdict, error) {
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for op := range numSoakOps {
		for w := range soakWorkers[op] {
			// A copy of the seed: pushes make their commits on its main.
			dir := filepath.Join(s.work, fmt.Sprintf("client-%s-%d", op, w))
			if _, err := s.git.Output(ctx, "", nil, "clone", "-q", "--bare", s.seed, dir); err != nil {
				return soakVerdict{}, err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.client(loadCtx, op, w, dir)
			}()
		}
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s.sampleLoop(sampleCtx)
	}()

	start := time.Now()
	minutes := int(s.o.duration / s.o.interval)
	faultFailed := 0
	for m := range minutes {
		t0 := start.Add(time.Duration(m) * s.o.interval)
		if err := sleepUntil(ctx, t0.Add(s.o.interval/4)); err != nil {
			return soakVerdict{}, err
		}
		plan, took, err := s.fault(ctx, m)
		if err != nil {
			if ctx.Err() != nil {
				return soakVerdict{}, ctx.Err()
			}
			faultFailed++
			fmt.Fprintf(os.Stderr, "  note minute=%d fault=%s: %v\n", m+1, plan, err)
		}
		if err := sleepUntil(ctx, t0.Add(s.o.interval)); err != nil {
			return soakVerdict{}, err
		}
		fmt.Println(s.minuteLine(m, plan, took, t0, time.Now()))
		// Between faults every node runs: one that exited was not the
		// soak's doing (a crash, or a signal from outside), and the rest
		// of the run would measure something else.
		for _, n := range s.cl.Nodes {
			if !n.Running() {
				return soakVerdict{}, fmt.Errorf("%s exited outside a fault; its log ends:\n%s", n.Name, n.LogTail(10))
			}
		}
	}
	stopLoad()
	wg.Wait()
	stopSampling()
	<-sampled

	lost, err := s.lost(ctx)
	if err != nil {
		return soakVerdict{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := tallySoak(s.recs, s.windows, s.o.grace, start, time.Now())
	s.noteFailures()
	return judgeSoak(minutes, all, len(s.acked), lost, faultFailed, flatness(s.samples, s.o.settle, flatLimit)), nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// client runs one operation in a loop until ctx ends; an operation
// started runs to its end (or -op-timeout).
func (s *soak) client(ctx context.Context, op soakOp, w int, dir string) {
	rng := rand.New(rand.NewPCG(uint64(op), uint64(w)))
	for seq := 0; ctx.Err() == nil; seq++ {
		repo := s.repos[rng.IntN(len(s.repos))]
		node, done := "api-serve", func() {}
		var n *multiproc.Node
		if op != soakAPI {
			var err error
			if n, done, err = s.lb.PickContext(ctx); err != nil {
				return // the load stopped
			}
			node = n.Name
		}
		opCtx, cancel := context.WithTimeout(context.Background(), s.o.opTimeout)
		start := time.Now()
		err := s.do(opCtx, op, n, repo, fmt.Sprintf("%s-%d-%d", op, w, seq), dir, rng)
		end := time.Now()
		cancel()
		done()
		s.record(soakRecord{op: op, start: start, end: end, err: err, node: node})
		// A short pause between operations: a steady load, not a
		// saturating one, on a machine the nodes share with the clients.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// do runs one operation on repo through n (nil for the read API).
func (s *soak) do(ctx context.Context, op soakOp, n *multiproc.Node, repo, id, dir string, rng *rand.Rand) error {
	switch op {
	case soakPush:
		out, err := s.git.Output(ctx, dir, nil, "commit-tree", "-p", s.tip, "-m", id, s.tip+"^{tree}")
		if err != nil {
			return err
		}
		sha := strings.TrimSpace(string(out))
		ref := "refs/heads/soak/" + id
		if _, err := s.git.Output(ctx, dir, nil, "push", "-q", n.HTTPURL(s.token, repo), sha+":"+ref); err != nil {
			return err
		}
		s.mu.Lock()
		s.acked = append(s.acked, multiproc.Ack{Repo: repo, Ref: ref, Want: sha, Node: n.Name})
		s.mu.Unlock()
		return nil
	case soakFetch:
		// Read back a push acknowledged earlier (any node may serve it).
		a, ok := s.randomAck(rng)
		if !ok {
			a = multiproc.Ack{Repo: repo, Ref: "refs/heads/main", Want: s.tip}
		}
		if _, err := s.git.Output(ctx, dir, nil, "fetch", "-q", n.HTTPURL(s.token, a.Repo), a.Ref); err != nil {
			return err
		}
		got, err := s.git.Output(ctx, dir, nil, "rev-parse", "FETCH_HEAD")
		if err != nil {
			return err
		}
		if g := strings.TrimSpace(string(got)); g != a.Want {
			return fmt.Errorf("fetch %s of %s via %s: got %s, pushed %s (via %s)", a.Ref, a.Repo, n.Name, g, a.Want, a.Node)
		}
		return nil
	case soakClone:
		dst := filepath.Join(s.work, "clone-"+id)
		defer os.RemoveAll(dst)
		_, err := s.git.Output(ctx, "", nil, "clone", "-q", "--bare", n.HTTPURL(s.token, repo), dst)
		return err
	case soakLsRemote:
		return lsRemote(ctx, s.http, n.HTTPURL(s.token, repo), s.tip+" refs/heads/main")
	case soakAPI:
		body, err := apiGet(ctx, s.http, "http://"+s.apiAddr+"/api/"+repo+"/refs", false)
		if err == nil && !strings.Contains(string(body), s.tip) {
			err = fmt.Errorf("read API refs of %s lack main %s: %.200s", repo, s.tip, body)
		}
		return err
	}
	return fmt.Errorf("unknown operation %d", op)
}

func (s *soak) randomAck(rng *rand.Rand) (multiproc.Ack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.acked) == 0 {
		return multiproc.Ack{}, false
	}
	return s.acked[rng.IntN(len(s.acked))], true
}

func (s *soak) record(r soakRecord) {
	s.mu.Lock()
	s.recs = append(s.recs, r)
	s.mu.Unlock()
}

// noteFailures prints the failed operations outside the fault windows
// and the first few inside them. The caller holds s.mu.
func (s *soak) noteFailures() {
	inside := 0
	for _, r := range s.recs {
		if r.err == nil {
			continue
		}
		what := "error"
		if inFault(r.start, r.end, s.windows, s.o.grace) {
			if inside++; inside > 10 {
				continue
			}
			what = "fault_error"
		}
		fmt.Fprintf(os.Stderr, "  %s op=%s via=%s start=%s end=%s: %s\n", what, r.op, r.node,
			r.start.UTC().Format("15:04:05.000"), r.end.UTC().Format("15:04:05.000"), lastLines([]byte(r.err.Error()), 3))
	}
}

// leaderRe reads the leader from admin status.
var leaderRe = regexp.MustCompile(`(?m)^leader: (\S+)`)

// leader asks a running node who leads.
func (s *soak) leader(ctx context.Context) (string, error) {
	var last error
	for _, n := range s.cl.Nodes {
		if !n.Running() {
			continue
		}
		out, err := s.cl.Admin(ctx, n, "status")
		if m := leaderRe.FindStringSubmatch(out); err == nil && m != nil {
			return m[1], nil
		}
		last = fmt.Errorf("status on %s: %q %v", n.Name, out, err)
	}
	return "", fmt.Errorf("no node names the leader: %w", last)
}

// fault injects fault m of the rotation and returns what it was and how
// long it lasted.
func (s *soak) fault(ctx context.Context, m int) (faultPlan, time.Duration, error) {
	leader, err := s.leader(ctx)
	if err != nil {
		return faultPlan{}, 0, err
	}
	var names []string
	byName := map[string]*multiproc.Node{}
	for _, n := range s.cl.Nodes {
		names = append(names, n.Name)
		byName[n.Name] = n
	}
	p := planFault(m, names, leader)
	n := byName[p.target]
	if p.target != "" && n == nil {
		return p, 0, fmt.Errorf("the leader %q is no node of the cluster", p.target)
	}
	begin := time.Now()
	err = s.inject(ctx, p, n)
	end := time.Now()
	s.mu.Lock()
	s.windows = append(s.windows, faultWindow{begin, end})
	s.mu.Unlock()
	return p, end.Sub(begin), err
}

func (s *soak) inject(ctx context.Context, p faultPlan, n *multiproc.Node) error {
	switch p.kind {
	case faultHang:
		if err := s.s3.Pause(); err != nil {
			return err
		}
		werr := sleepUntil(ctx, time.Now().Add(s.o.hang))
		return errors.Join(werr, s.s3.Resume())
	case faultKill9:
		if err := n.Kill(); err != nil {
			return err
		}
	case faultTerm, faultLeader:
		// Out of rotation first, in-flight requests finished: what the
		// load balancer does for a terminating pod.
		s.lb.TakeOut(n)
		if err := n.Term(time.Minute); err != nil {
			// Started again all the same: the run goes on.
			return errors.Join(err, n.Start(), n.WaitReady(ctx))
		}
	}
	if err := n.Start(); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// sampleLoop reads every running node's resources each -sample.
func (s *soak) sampleLoop(ctx context.Context) {
	tick := time.NewTicker(s.o.sample)
	defer tick.Stop()
	for {
		for _, n := range s.cl.Nodes {
			if r, ok := readResources(ctx, n); ok {
				s.mu.Lock()
				s.samples = append(s.samples, r)
				s.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readResources reads n's RSS and open files from /proc and its
// goroutines from /metrics; ok is false when the node is not up.
func readResources(ctx context.Context, n *multiproc.Node) (resSample, bool) {
	pid := n.Pid()
	if pid == 0 || !n.Running() {
		return resSample{}, false
	}
	m, err := nodeMetrics(ctx, n, "go_goroutines", "rgit_open_repos")
	if err != nil {
		return resSample{}, false
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil || n.Pid() != pid {
		return resSample{}, false
	}
	return resSample{node: n.Name, pid: pid, at: time.Now(), rssKB: procStatusKB(strconv.Itoa(pid), "VmRSS:"), fds: len(fds), goroutines: int(m[0]), repos: int(m[1])}, true
}

// nodeMetrics reads samples of n's /metrics (names with their labels).
func nodeMetrics(ctx context.Context, n *multiproc.Node, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", n.Name, err)
	}
	vals := make([]float64, len(names))
	for i, name := range names {
		v, ok, err := metricValue(string(b), name)
		if err == nil && !ok {
			err = fmt.Errorf("metrics of %s: no %s", n.Name, name)
		}
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// minuteLine is interval m's line.
func (s *soak) minuteLine(m int, p faultPlan, took time.Duration, from, to time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := tallySoak(s.recs, s.windows, s.o.grace, from, to)
	var b strings.Builder
	fmt.Fprintf(&b, "soak minute=%d fault=%s fault_s=%.1f ops=%d errors=%d fault_errors=%d p99_ms=", m+1, p, took.Seconds(), t.ops, t.errors, t.faultErrors)
	for op := range numSoakOps {
		if op > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", op, t.p99[op].Milliseconds())
	}
	last := map[string]resSample{}
	for _, r := range s.samples {
		last[r.node] = r
	}
	for _, n := range s.cl.Nodes {
		r := last[n.Name]
		fmt.Fprintf(&b, " %s=rss_mb:%.0f,fds:%d,goroutines:%d,repos:%d", n.Name, kbToMB(r.rssKB), r.fds, r.goroutines, r.repos)
	}
	return b.String()
}

// lost reads every repository's branches through a node and counts the
// acknowledged pushes they do not show.
func (s *soak) lost(ctx context.Context) (int, error) {
	n := s.cl.Nodes[0]
	heads := map[string]map[string]string{}
	for _, r := range s.repos {
		out, err := s.git.Output(ctx, "", nil, "ls-remote", n.HTTPURL(s.token, r), "refs/heads/*")
		if err != nil {
			return 0, fmt.Errorf("final ls-remote of %s: %w", r, err)
		}
		heads[r] = multiproc.ParseLsRemote(string(out))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := multiproc.Lost(s.acked, heads)
	for i, a := range lost {
		if i == 10 {
			break
		}
		fmt.Fprintf(os.Stderr, "  lost %s of %s = %s (via %s); the server has %q\n", a.Ref, a.Repo, a.Want, a.Node, heads[a.Repo][a.Ref])
	}
	return len(lost), nil
}
