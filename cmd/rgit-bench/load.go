package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
)

// The load benchmark: many clients at once against many repositories,
// mixed like a CI fleet, against `git http-backend` and against an rgit
// node serving copies of the same repositories. Both servers run the
// whole time and take turns in -rounds rounds (git then rgit, then rgit
// then git, …), each loaded for its share of -duration, so a change in
// the machine's load hits both alike. The mix is by
// client: 70% of the clients poll (ls-remote), 20% fetch, 5% clone and 5%
// push, each in a loop on random repositories, so every kind runs at its
// own pace (drawing the operation per request instead would leave every
// client waiting in the slow git operations once the first second's burst
// of polls is over). Lines:
//
//	load op=<ls-remote|fetch|clone|push> server=<rgit|git> ops_per_sec=<X> p50_ms=<Y> p99_ms=<Z> errors=<N>
//	load server=rgit peak_rss_mb=<M>
//
// ls-remote (which is also what a fetch with nothing new costs the server:
// protocol v2's ls-refs, then nothing) is driven in Go over smart HTTP, so
// hundreds of clients do not measure the client machine; both servers see
// the same requests. fetch (a client main~fetchBehind behind), clone and
// push run real `git`. Every push sends a new commit to a branch of its
// own, so a rejection is never a legitimate conflict: every failure is
// an error (5xx, a dropped connection, a timeout, a wrong answer).
//
// A fleet's clients run on their own machines; here they share the
// server's. So that git clients do not starve the server of CPU, at most
// -git-procs git operations run at once (their clients wait for a slot)
// and an operation's time starts when it has its slot: latencies are the
// server's plus the client's own work, not the wait for a local slot.

// loadOp is one kind of client operation.
type loadOp int

const (
	opLsRemote loadOp = iota
	opFetch
	opClone
	opPush
	numLoadOps
)

var loadOpNames = [numLoadOps]string{"ls-remote", "fetch", "clone", "push"}

func (o loadOp) String() string { return loadOpNames[o] }

// loadMix is the share of each operation, in loadOp order; they sum to 1.
var loadMix = [numLoadOps]float64{0.70, 0.20, 0.05, 0.05}

// pickOp maps u in [0, 1) to the operation whose share of mix covers it:
// client id of n does pickOp(mix, (id+0.5)/n).
func pickOp(mix [numLoadOps]float64, u float64) loadOp {
	acc := 0.0
	for op := range numLoadOps {
		acc += mix[op]
		if u < acc {
			return op
		}
	}
	return numLoadOps - 1 // rounding: the sum may fall a hair short of 1
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted.
func percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(float64(len(sorted))*p/100+0.9999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// opStats collects one operation's outcomes on one server.
type opStats struct {
	mu     sync.Mutex
	lat    []time.Duration // successful operations only
	errors int
	first  []string // the first few errors, for the operator
}

func (s *opStats) record(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors++
		if len(s.first) < 3 {
			s.first = append(s.first, err.Error())
		}
		return
	}
	s.lat = append(s.lat, d)
}

// line formats the result line for op on server over a run of secs.
func (s *opStats) line(op loadOp, server string, secs float64) string {
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("load op=%s server=%s ops_per_sec=%.1f p50_ms=%.1f p99_ms=%.1f errors=%d",
		op, server, float64(len(lat))/secs, ms(percentile(lat, 50)), ms(percentile(lat, 99)), s.errors)
}

type loadFlags struct {
	commonFlags
	rgitBin  string
	clients  int
	duration time.Duration
	repos    int
	rounds   int
	opTime   time.Duration
	gitProcs int
}

func runLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var c loadFlags
	c.register(fs, "small")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.IntVar(&c.clients, "clients", 200, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long each server is loaded, in all")
	fs.IntVar(&c.rounds, "rounds", 2, "turns each server takes (they alternate, -duration/-rounds each)")
	fs.IntVar(&c.repos, "repos", 50, "repositories the clients spread over")
	fs.DurationVar(&c.opTime, "op-timeout", time.Minute, "an operation taking longer is an error")
	fs.IntVar(&c.gitProcs, "git-procs", 2*runtime.NumCPU(), "git client operations (fetch, clone, push) running at once")
	fs.Parse(args)
	if c.clients < 1 || c.repos < 1 || c.duration <= 0 || c.gitProcs < 1 || c.rounds < 1 {
		return errors.New("-clients, -repos, -duration, -rounds and -git-procs must be positive")
	}
	bin, err := rgitBinary(c.rgitBin)
	if err != nil {
		return err
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	if len(fxs) != 1 {
		return errors.New("load: give one fixture")
	}
	work, err := c.workDir("load-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	hf, err := prepareHTTP(ctx, fxs[0], work)
	if err != nil {
		return err
	}
	names := make([]string, c.repos)
	for i := range names {
		names[i] = fmt.Sprintf("load-%03d", i)
	}
	fmt.Fprintf(os.Stderr, "load: %d clients (%d git operations at once), %s per server, %d repositories of fixture %s\n",
		c.clients, c.gitProcs, c.duration, c.repos, hf.Name)

	// git http-backend over copies of the fixture.
	gs, err := startGitHTTP(work)
	if err != nil {
		return err
	}
	defer gs.Close() // also closed once the rounds end; Close twice is harmless
	for _, n := range names {
		dst := filepath.Join(gs.root, n+".git")
		if out, err := exec.CommandContext(ctx, "cp", "-a", hf.Dir, dst).CombinedOutput(); err != nil {
			return fmt.Errorf("copy fixture: %w: %s", err, out)
		}
		if _, err := fixture.Git(ctx, dst, nil, "config", "http.receivepack", "true"); err != nil {
			return err
		}
	}
	gitURLs := make([]string, len(names))
	for i, n := range names {
		gitURLs[i] = gs.url(n + ".git")
	}

	// rgit, with the same repositories pushed to it.
	srv, err := startRgit(ctx, rgitEnv{bin: bin, storeURL: "file://" + filepath.Join(work, "store"),
		cacheDir: filepath.Join(work, "cache"), hostKey: filepath.Join(work, "host_key")})
	if err != nil {
		return err
	}
	gitRes, rgitRes := newLoadResult("git"), newLoadResult("rgit")
	err = func() error {
		token, err := srv.admin(ctx, "add-token", benchOwner)
		if err != nil {
			return err
		}
		urls := make([]string, len(names))
		for i, n := range names {
			if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+n); err != nil {
				return err
			}
			urls[i] = srv.url(token, n)
			if _, err := timeGit(ctx, hf.Dir, "push", "-q", "--mirror", urls[i]); err != nil {
				return err
			}
		}
		turn := c
		turn.duration = c.duration / time.Duration(c.rounds)
		for round := range c.rounds {
			order := []func() error{
				func() error { return runLoadOn(ctx, hf, turn, gitURLs, round, gitRes) },
				func() error { return runLoadOn(ctx, hf, turn, urls, round, rgitRes) },
			}
			if round%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, run := range order {
				if err := run(); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	gs.Close()
	hits, _, herr := srv.metric(ctx, clonePacksLocal)
	rss, serr := srv.stop()
	if err != nil {
		return fmt.Errorf("%w\nrgit log:\n%s", err, lastLines(srv.log.Bytes(), 15))
	}
	if serr != nil {
		return serr
	}
	for _, r := range []*loadResult{gitRes, rgitRes} {
		r.report(os.Stdout, os.Stderr)
	}
	fmt.Printf("load server=rgit peak_rss_mb=%.0f\n", float64(rss)/1024)
	if herr == nil {
		// rgit runs as deployed, its clone-pack cache on; pushes keep
		// changing the refs, so few clones are hits. Say how many were.
		fmt.Fprintf(os.Stderr, "  note server=rgit clone_cache_hits=%.0f clones=%d\n", hits, len(rgitRes.ops[opClone].lat))
	}
	fmt.Printf("load total rgit_ops_per_sec=%.1f git_ops_per_sec=%.1f ratio=%.2f rounds=%d\n",
		rgitRes.total(), gitRes.total(), rgitRes.total()/max(gitRes.total(), 1e-9), c.rounds)
	if lastLines(srv.log.Bytes(), 1) != "" {
		fmt.Fprintf(os.Stderr, "rgit log (last lines):\n%s\n", lastLines(srv.log.Bytes(), 10))
	}
	return nil
}

// loadResult is one server's runs, added up over the rounds.
type loadResult struct {
	server string
	secs   float64
	ops    [numLoadOps]*opStats
}

func newLoadResult(server string) *loadResult {
	r := &loadResult{server: server}
	for i := range r.ops {
		r.ops[i] = &opStats{}
	}
	return r
}

func (r *loadResult) total() float64 {
	n := 0
	for _, s := range r.ops {
		n += len(s.lat)
	}
	return float64(n) / r.secs
}

func (r *loadResult) report(stdout, notes io.Writer) {
	for op, s := range r.ops {
		fmt.Fprintln(stdout, s.line(loadOp(op), r.server, r.secs))
		for _, e := range s.first {
			fmt.Fprintf(notes, "  error op=%s server=%s: %s\n", loadOp(op), r.server, lastLines([]byte(e), 3))
		}
	}
}

// loadClient is the state one simulated client needs.
type loadClient struct {
	hf     *httpFixture
	id     int
	http   *http.Client
	dir    string // the client's scratch directory
	src    string // bare repository the client makes push commits in
	tree   string // main's tree, for push commits
	seq    int
	server string
	round  int
}

// runLoadOn runs c.clients clients against urls (one per repository) for
// c.duration, adding their outcomes to res.
func runLoadOn(ctx context.Context, hf *httpFixture, c loadFlags, urls []string, round int, res *loadResult) error {
	server := res.server
	tree, err := hf.Rev(ctx, "refs/heads/main^{tree}")
	if err != nil {
		return err
	}
	base := filepath.Join(hf.work, "clients-"+server)
	// Push commits are made in one shared repository holding the fixture's
	// objects (concurrent object writes are safe in git).
	src := filepath.Join(base, "src.git")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(base)
	if out, err := exec.CommandContext(ctx, "cp", "-al", hf.Dir, src).CombinedOutput(); err != nil {
		return fmt.Errorf("copy push source: %w: %s", err, out)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: c.clients, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: c.opTime}

	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	gitSlots := make(chan struct{}, c.gitProcs)
	var wg sync.WaitGroup
	start := time.Now()
	for id := range c.clients {
		cl := &loadClient{hf: hf, id: id, http: hc, dir: filepath.Join(base, fmt.Sprint(id)), src: src, tree: tree, server: server, round: round}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 14))
			op := pickOp(loadMix, (float64(id)+0.5)/float64(c.clients))
			for runCtx.Err() == nil {
				url := urls[rng.IntN(len(urls))]
				if op != opLsRemote {
					select {
					case gitSlots <- struct{}{}:
					case <-runCtx.Done():
						return
					}
				}
				// An operation started before the deadline runs to its end
				// (bounded by -op-timeout): cutting it off is no server error.
				opCtx, opCancel := context.WithTimeout(ctx, c.opTime)
				t0 := time.Now()
				err := cl.do(opCtx, op, url)
				d := time.Since(t0)
				opCancel()
				if op != opLsRemote {
					<-gitSlots
				}
				if ctx.Err() != nil {
					return
				}
				res.ops[op].record(d, err)
			}
		}()
	}
	wg.Wait()
	res.secs += time.Since(start).Seconds()
	return ctx.Err()
}

func (cl *loadClient) do(ctx context.Context, op loadOp, repoURL string) error {
	switch op {
	case opLsRemote:
		return lsRemote(ctx, cl.http, repoURL, cl.hf.mainTip+" refs/heads/main")
	case opFetch:
		dst := cl.dir + "-fetch"
		defer os.RemoveAll(dst)
		if out, err := exec.CommandContext(ctx, "cp", "-al", cl.hf.client, dst).CombinedOutput(); err != nil {
			return fmt.Errorf("copy fetch client: %w: %s", err, out)
		}
		if _, err := timeGit(ctx, dst, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "fetch", "-q", repoURL, "+refs/heads/main:refs/heads/main"); err != nil {
			return err
		}
		return cl.hf.checkMain(ctx, dst)
	case opClone:
		dst := cl.dir + "-clone"
		defer os.RemoveAll(dst)
		if _, err := timeGit(ctx, cl.hf.work, "clone", "-q", "--bare", repoURL, dst); err != nil {
			return err
		}
		return cl.hf.checkMain(ctx, dst)
	case opPush:
		cl.seq++
		// The commit is made before the clock starts in a real fleet too;
		// here it is inside, the same on both servers.
		out, err := fixture.Git(ctx, cl.src, nil, "commit-tree", cl.tree, "-p", cl.hf.mainTip, "-m", fmt.Sprintf("load %s %d %d %d", cl.server, cl.round, cl.id, cl.seq))
		if err != nil {
			return err
		}
		ref := fmt.Sprintf("refs/heads/load/r%d-%d-%d", cl.round, cl.id, cl.seq)
		_, err = timeGit(ctx, cl.src, "push", "-q", repoURL, strings.TrimSpace(string(out))+":"+ref)
		return err
	}
	return fmt.Errorf("unknown operation %d", op)
}

// lsRefsRequest is protocol v2's ls-refs as `git fetch` sends it for a
// branch refspec (and as a fetch with nothing new ends).
var lsRefsRequest = pktLines("command=ls-refs\n", "agent=git/rgit-bench-load\n", "object-format=sha1\n") + "0001" +
	pktLines("peel\n", "symrefs\n", "ref-prefix HEAD\n", "ref-prefix refs/heads/\n", "ref-prefix refs/tags/\n") + "0000"

func pktLines(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%04x%s", len(l)+4, l)
	}
	return b.String()
}

// lsRemote is a v2 ls-remote over smart HTTP: the capability
// advertisement, then ls-refs. The answer must contain want and end with a
// flush packet.
func lsRemote(ctx context.Context, hc *http.Client, repoURL, want string) error {
	u, err := url.Parse(repoURL)
	if err != nil {
		return err
	}
	user := u.User
	u.User = nil
	get := func(method, path, ctype string, body io.Reader) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, u.String()+path, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Git-Protocol", "version=2")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
			req.Header.Set("Accept", "application/x-git-upload-pack-result")
		}
		if user != nil {
			pw, _ := user.Password()
			req.SetBasicAuth(user.Username(), pw)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, lastLines(b, 2))
		}
		return b, nil
	}
	adv, err := get("GET", "/info/refs?service=git-upload-pack", "", nil)
	if err != nil {
		return err
	}
	if !bytes.Contains(adv, []byte("version 2")) || !bytes.Contains(adv, []byte("ls-refs")) {
		return fmt.Errorf("info/refs: no protocol v2 ls-refs in the advertisement: %q", lastLines(adv, 2))
	}
	refs, err := get("POST", "/git-upload-pack", "application/x-git-upload-pack-request", strings.NewReader(lsRefsRequest))
	if err != nil {
		return err
	}
	if !bytes.HasSuffix(refs, []byte("0000")) || !bytes.Contains(refs, []byte(want)) {
		return fmt.Errorf("ls-refs: answer lacks %q or its flush: %q", want, lastLines(refs, 2))
	}
	return nil
}
