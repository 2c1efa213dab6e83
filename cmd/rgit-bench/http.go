package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/s3local"
)

// HTTP operations, in the order they run: the first push creates the
// repository every later operation reads.
var httpOps = []string{"http-push", "http-clone", "http-fetch", "http-clone-x20"}

// httpFixture is one fixture prepared for the HTTP measurements.
type httpFixture struct {
	*fixture.Fixture
	work    string // scratch for clones
	client  string // bare repository at main~fetchBehind (fetch template)
	mainTip string
}

// httpSide is one server under test.
type httpSide struct {
	// cloneURL serves the whole fixture.
	cloneURL string
	// pushURL returns the URL of a new, empty repository for run.
	pushURL func(ctx context.Context, run int) (string, error)
}

type httpFlags struct {
	commonFlags
	stores      string
	ops         string
	rgitBin     string
	concurrency int
}

// runHTTP measures end-to-end git operations over smart HTTP, rgit
// against git http-backend on the same fixture, per rgit object store:
//
//	bench op=<op> fixture=<f>-<store> cache=off rgit_s=… git_s=… ratio=… rgit_rss_mb=… rgit=http-server ref=git-http-backend
//	bench op=http-clone|http-clone-x20 fixture=<f>-<store> cache=hit rgit_s=… rgit_rss_mb=… rgit=cache-hit ref=none
//
// The cache=off lines are the comparison: the node runs without its
// clone-pack cache (RGIT_CLONE_CACHE_BYTES=0), so it computes every
// clone as http-backend does, and each git run goes right before the
// rgit run of the same operation on the same store. The cache=hit lines
// are a node with the cache on after one untimed clone filled it, every
// timed clone checked to be a hit in its metrics; git has no such cache,
// so they have no reference. Every clone and fetch is checked to end at
// the fixture's main.
func runHTTP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("http", flag.ExitOnError)
	var c httpFlags
	c.register(fs, "small,medium")
	fs.StringVar(&c.stores, "stores", "file,s3", "rgit object stores to run against: file, s3 (versitygw)")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.IntVar(&c.concurrency, "concurrency", 20, "clones running at once in http-clone-x20")
	fs.StringVar(&c.ops, "ops", strings.Join(httpOps, ","), "comma-separated operations to run (http-push always runs: it creates the repository the others read)")
	fs.Parse(args)
	ops, err := selectOps(c.ops)
	if err != nil {
		return err
	}
	bin, err := rgitBinary(c.rgitBin)
	if err != nil {
		return err
	}
	stores := strings.Split(c.stores, ",")
	for _, s := range stores {
		if s != "file" && s != "s3" {
			return fmt.Errorf("-stores: unknown store %q (want file, s3)", s)
		}
	}
	gb, err := c.startGitBench(ctx, "http-work-")
	if err != nil {
		return err
	}
	defer gb.close()
	work, gs, gitRoot := gb.work, gb.gs, gb.gs.root

	var s3 *s3local.Server
	if strings.Contains(c.stores, "s3") {
		if s3, err = startS3(work); err != nil {
			return err
		}
		defer s3.Close()
	}

	for _, f := range gb.fxs {
		hf, err := prepareHTTP(ctx, f, work)
		if err != nil {
			return err
		}
		cloneURL, err := gs.serveFixture(f)
		if err != nil {
			return err
		}
		gitSide := httpSide{
			cloneURL: cloneURL,
			pushURL: func(ctx context.Context, run int) (string, error) {
				name := fmt.Sprintf("push-%s-%d.git", f.Name, run)
				dir := filepath.Join(gitRoot, name)
				os.RemoveAll(dir)
				if _, err := fixture.Git(ctx, gitRoot, nil, "init", "-q", "--bare", dir); err != nil {
					return "", err
				}
				if _, err := fixture.Git(ctx, dir, nil, "config", "http.receivepack", "true"); err != nil {
					return "", err
				}
				return gs.url(name), nil
			},
		}
		for _, store := range stores {
			env := rgitEnv{
				bin:      bin,
				cacheDir: filepath.Join(work, "cache-"+f.Name+"-"+store),
				hostKey:  filepath.Join(work, "host_key"),
			}
			switch store {
			case "file":
				env.storeURL = "file://" + filepath.Join(work, "store-"+f.Name)
			case "s3":
				env.storeURL = "s3://" + s3.Bucket + "/" + f.Name
				env.extra = s3.Env()
			}
			// Each git run goes right before the rgit run of the same
			// operation on this store: on a loaded machine the two sides
			// then see the same load, which a ratio of two separate
			// series would not.
			gitRes := map[string][]sample{}
			gitRun := func(op string, run int) error {
				s, err := hf.measure(ctx, op, gitSide, run, c.concurrency)
				if err != nil {
					return fmt.Errorf("git side: %w", err)
				}
				gitRes[op] = append(gitRes[op], s)
				return nil
			}
			// The headline: every answer computed, as git http-backend
			// computes it (no clone-pack cache).
			cold := env
			cold.extra = append(slices.Clone(env.extra), "RGIT_CLONE_CACHE_BYTES=0")
			rg, err := hf.benchRgit(ctx, cold, ops, c.runs, c.concurrency, gitRun)
			if err != nil {
				return fmt.Errorf("rgit side, %s store: %w", store, err)
			}
			for _, op := range ops {
				r := result{op: op, fixture: f.Name + "-" + store, labels: []string{"cache=off"}, cmp: cmpHTTP,
					rgit: rg.samples[op], git: gitRes[op], rgitRSSMB: float64(rg.rssKB[op]) / 1024}
				r.report(os.Stdout, os.Stderr)
			}
			// The clone-pack cache's hits, on their own lines.
			hits, err := hf.benchHits(ctx, env, ops, c.runs, c.concurrency)
			if err != nil {
				return fmt.Errorf("rgit side, %s store, clone-pack cache: %w", store, err)
			}
			for _, r := range hits {
				r.fixture = f.Name + "-" + store
				r.report(os.Stdout, os.Stderr)
			}
		}
		os.RemoveAll(hf.client)
	}
	return nil
}

// selectOps parses -ops into httpOps order, http-push first whether named
// or not.
func selectOps(list string) ([]string, error) {
	want := map[string]bool{httpOps[0]: true}
	for _, op := range strings.Split(list, ",") {
		op = strings.TrimSpace(op)
		if !slices.Contains(httpOps, op) {
			return nil, fmt.Errorf("-ops: unknown operation %q (want %s)", op, strings.Join(httpOps, ", "))
		}
		want[op] = true
	}
	var ops []string
	for _, op := range httpOps {
		if want[op] {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// prepareHTTP makes the fetch client template: a bare repository holding
// exactly main~fetchBehind and its history.
func prepareHTTP(ctx context.Context, f *fixture.Fixture, work string) (*httpFixture, error) {
	hf := &httpFixture{Fixture: f, work: work, client: filepath.Join(work, "client-"+f.Name+".git")}
	var err error
	if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
		return nil, err
	}
	behind, err := f.Rev(ctx, fmt.Sprintf("refs/heads/main~%d", fetchBehind))
	if err != nil {
		return nil, err
	}
	if _, err := fixture.Git(ctx, work, nil, "init", "-q", "--bare", hf.client); err != nil {
		return nil, err
	}
	// A real transfer (not a local clone's hard links), so the client
	// lacks the last commits' objects as a real one would.
	if _, err := fixture.Git(ctx, hf.client, nil, "fetch", "-q", "--no-tags", "file://"+f.Dir, behind+":refs/heads/main"); err != nil {
		return nil, err
	}
	return hf, nil
}

type rgitResults struct {
	samples map[string][]sample
	rssKB   map[string]int64
}

// benchRgit runs every HTTP operation against rgit, restarting the node
// for each so the peak RSS of each operation is its own. paired, if set,
// runs before each rgit run (the git side's run of the same operation).
// The node must run without a clone-pack cache: every clone is checked to
// have been built.
func (hf *httpFixture) benchRgit(ctx context.Context, env rgitEnv, ops []string, runs, concurrency int, paired func(op string, run int) error) (*rgitResults, error) {
	res := &rgitResults{samples: map[string][]sample{}, rssKB: map[string]int64{}}
	for _, op := range ops {
		err := hf.onNode(ctx, env, res, op, func(srv *rgitServer, side httpSide) error {
			for run := range runs {
				if paired != nil {
					if err := paired(op, run); err != nil {
						return err
					}
				}
				s, err := hf.measure(ctx, op, side, run, concurrency)
				if err != nil {
					return err
				}
				res.samples[op] = append(res.samples[op], s)
			}
			_, on, err := srv.metric(ctx, clonePacksLocal)
			if err == nil && on {
				err = fmt.Errorf("the node has a clone-pack cache (it exports %s)", clonePacksLocal)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// clonePacksLocal counts clone packs a node answered from its own disk.
const clonePacksLocal = `rgit_clone_packs_total{source="local"}`

// hitOps are the operations the clone-pack cache answers.
var hitOps = []string{"http-clone", "http-clone-x20"}

// benchHits times the clone operations among ops on a node with its
// clone-pack cache on, after one untimed clone filled it: every timed
// clone must be a hit (the node's metrics say so). These lines have no
// reference: git http-backend has no such cache.
func (hf *httpFixture) benchHits(ctx context.Context, env rgitEnv, ops []string, runs, concurrency int) ([]result, error) {
	res := &rgitResults{samples: map[string][]sample{}, rssKB: map[string]int64{}}
	var out []result
	for _, op := range ops {
		if !slices.Contains(hitOps, op) {
			continue
		}
		err := hf.onNode(ctx, env, res, op, func(srv *rgitServer, side httpSide) error {
			if _, err := hf.measure(ctx, "http-clone", side, 0, 1); err != nil {
				return fmt.Errorf("fill the clone-pack cache: %w", err)
			}
			before, _, err := srv.metric(ctx, clonePacksLocal)
			if err != nil {
				return err
			}
			clones := 0
			for run := range runs {
				s, err := hf.measure(ctx, op, side, run, concurrency)
				if err != nil {
					return err
				}
				res.samples[op] = append(res.samples[op], s)
				clones += map[bool]int{true: concurrency, false: 1}[op == "http-clone-x20"]
			}
			after, _, err := srv.metric(ctx, clonePacksLocal)
			if err != nil {
				return err
			}
			if got := int(after - before); got != clones {
				return fmt.Errorf("%s: %d of %d clones were clone-pack cache hits", op, got, clones)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, result{op: op, labels: []string{"cache=hit"}, cmp: cmpHit, rgit: res.samples[op], rgitRSSMB: float64(res.rssKB[op]) / 1024})
	}
	return out, nil
}

// onNode starts a node on env, runs fn against it (the repository the
// first http-push run created is the one clones read) and stops it,
// keeping its peak RSS as op's.
func (hf *httpFixture) onNode(ctx context.Context, env rgitEnv, res *rgitResults, op string, fn func(*rgitServer, httpSide) error) error {
	srv, err := startRgit(ctx, env)
	if err != nil {
		return err
	}
	err = func() error {
		token, err := srv.admin(ctx, "add-token", benchOwner)
		if err != nil {
			return err
		}
		side := httpSide{
			cloneURL: srv.url(token, "push-0"),
			pushURL: func(ctx context.Context, run int) (string, error) {
				name := fmt.Sprintf("push-%d", run)
				if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+name); err != nil {
					return "", err
				}
				return srv.url(token, name), nil
			},
		}
		return fn(srv, side)
	}()
	rss, serr := srv.stop()
	if err != nil {
		return fmt.Errorf("%w\nrgit log:\n%s", err, lastLines(srv.log.Bytes(), 15))
	}
	if serr != nil {
		return serr
	}
	res.rssKB[op] = rss
	return nil
}

// measure runs op once against side and returns its wall time. Client-side
// git work (index-pack of the received pack, …) is included: this is what
// a user waits for.
func (hf *httpFixture) measure(ctx context.Context, op string, side httpSide, run, concurrency int) (sample, error) {
	switch op {
	case "http-push":
		url, err := side.pushURL(ctx, run)
		if err != nil {
			return sample{}, err
		}
		return timeGit(ctx, hf.Dir, "push", "-q", "--mirror", url)
	case "http-clone":
		dst := filepath.Join(hf.work, "clone")
		defer os.RemoveAll(dst)
		s, err := timeGit(ctx, hf.work, "clone", "-q", "--bare", side.cloneURL, dst)
		if err != nil {
			return s, err
		}
		return s, hf.checkMain(ctx, dst)
	case "http-fetch":
		dst := filepath.Join(hf.work, "fetch-client")
		os.RemoveAll(dst)
		defer os.RemoveAll(dst)
		// Hard links are safe: git writes new packs and replaces refs by
		// rename, so the template is not changed.
		if out, err := exec.CommandContext(ctx, "cp", "-al", hf.client, dst).CombinedOutput(); err != nil {
			return sample{}, fmt.Errorf("copy fetch client: %w: %s", err, out)
		}
		s, err := timeGit(ctx, dst, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "fetch", "-q", side.cloneURL, "+refs/heads/main:refs/heads/main")
		if err != nil {
			return s, err
		}
		return s, hf.checkMain(ctx, dst)
	case "http-clone-x20":
		return hf.concurrentClones(ctx, side.cloneURL, concurrency)
	}
	return sample{}, fmt.Errorf("unknown operation %q", op)
}

func (hf *httpFixture) concurrentClones(ctx context.Context, url string, n int) (sample, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := filepath.Join(hf.work, fmt.Sprintf("clone-%d", i))
			_, errs[i] = timeGit(ctx, hf.work, "clone", "-q", "--bare", url, dst)
		}()
	}
	wg.Wait()
	s := sample{secs: time.Since(start).Seconds()}
	for i := range n {
		dst := filepath.Join(hf.work, fmt.Sprintf("clone-%d", i))
		if errs[i] == nil {
			errs[i] = hf.checkMain(ctx, dst)
		}
		os.RemoveAll(dst)
	}
	return s, errors.Join(errs...)
}

// checkMain fails unless the client's main is the fixture's.
func (hf *httpFixture) checkMain(ctx context.Context, dir string) error {
	out, err := fixture.Git(ctx, dir, nil, "rev-parse", "refs/heads/main")
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(out)); got != hf.mainTip {
		return fmt.Errorf("%s: main is %s after the transfer, want %s", dir, got, hf.mainTip)
	}
	return nil
}

func timeGit(ctx context.Context, dir string, args ...string) (sample, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, fixture.GitEnv()
	s, err := runTimed(cmd)
	s.rssKB = 0 // the client's RSS is not what is being compared
	return s, err
}
