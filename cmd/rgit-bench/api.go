package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/freeport"
)

// The read-API benchmark (make bench-api): each endpoint timed over HTTP
// against a running node, next to the C git plumbing command that
// computes the same answer, run as a process on the same repository:
//
//	bench op=api-<op> fixture=<f> cache=<off|redis> rgit_ms=<p50> git_ms=<p50> ratio=<r> rps=<X>
//
// cache=off is a node without RGIT_REDIS_URL (every answer computed);
// cache=redis is a node with a local redis-server after one warming
// request (every answer a hit). rps is requests per second with
// apiWorkers clients on keep-alive connections for apiRPSTime.
var apiOps = []string{"refs", "tree", "blob", "log", "commit", "archive"}

const (
	apiWorkers = 8
	apiRPSTime = 2 * time.Second
)

type apiFlags struct {
	commonFlags
	rgitBin string
	caches  string
	ops     string
	n       int
}

func runAPI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("api", flag.ExitOnError)
	var c apiFlags
	c.register(fs, "small,large")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.StringVar(&c.caches, "caches", "off,redis", "cache settings to run: off, redis (needs redis-server)")
	fs.IntVar(&c.n, "n", 41, "timed requests per endpoint (the median is reported)")
	fs.StringVar(&c.ops, "ops", strings.Join(apiOps, ","), "endpoints to measure")
	fs.Parse(args)
	ops := strings.Split(c.ops, ",")
	for _, op := range ops {
		if !slices.Contains(apiOps, op) {
			return fmt.Errorf("-ops: unknown %q (want some of %s)", op, strings.Join(apiOps, ","))
		}
	}
	bin, err := rgitBinary(c.rgitBin)
	if err != nil {
		return err
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	work, err := c.workDir("api-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, f := range fxs {
		targets, err := apiTargets(ctx, f)
		if err != nil {
			return err
		}
		gitMS := map[string]float64{}
		for _, op := range ops {
			if gitMS[op], err = gitP50(ctx, f.Dir, targets.git[op], c.n); err != nil {
				return err
			}
		}
		for _, cache := range strings.Split(c.caches, ",") {
			env := rgitEnv{bin: bin, storeURL: "file://" + filepath.Join(work, "store-"+f.Name+"-"+cache),
				cacheDir: filepath.Join(work, "cache-"+f.Name+"-"+cache), hostKey: filepath.Join(work, "host_key")}
			switch cache {
			case "off":
			case "redis":
				url, stop, err := startRedis(work)
				if err != nil {
					return err
				}
				defer stop()
				env.extra = []string{"RGIT_REDIS_URL=" + url}
			default:
				return fmt.Errorf("-caches: unknown %q (want off, redis)", cache)
			}
			if err := benchAPIOn(ctx, f, env, cache, ops, targets, gitMS, c.n); err != nil {
				return fmt.Errorf("%s cache=%s: %w", f.Name, cache, err)
			}
		}
	}
	return nil
}

// apiTarget is what each op asks: the API path and the git command.
type apiTarget struct {
	api map[string]string // op → path after /api/bench/<name>/
	git map[string][]string
}

// apiTargets picks the requests: main's tip for tree, log, commit and
// archive, and the largest text file under 64 KiB of its tree for blob.
func apiTargets(ctx context.Context, f *fixture.Fixture) (apiTarget, error) {
	head, err := f.Rev(ctx, "refs/heads/main")
	if err != nil {
		return apiTarget{}, err
	}
	out, err := fixture.Git(ctx, f.Dir, nil, "ls-tree", "-r", "-l", head)
	if err != nil {
		return apiTarget{}, err
	}
	var blob, path string
	var best int64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		meta, p, _ := strings.Cut(sc.Text(), "\t")
		fl := strings.Fields(meta)
		if len(fl) != 4 || fl[1] != "blob" || !strings.HasSuffix(p, ".go") {
			continue
		}
		if size, _ := strconv.ParseInt(fl[3], 10, 64); size > best && size < 64<<10 {
			best, blob, path = size, fl[2], p
		}
	}
	if blob == "" {
		return apiTarget{}, fmt.Errorf("%s: no .go file under 64 KiB at main", f.Name)
	}
	fmt.Fprintf(os.Stderr, "  note fixture=%s head=%s blob=%s (%s, %d bytes)\n", f.Name, head, blob, path, best)
	return apiTarget{
		api: map[string]string{
			"refs": "refs", "tree": "tree/" + head, "blob": "blob/" + blob, "log": "log/" + head + "?n=50",
			"commit": "commit/" + head, "archive": "archive/" + head + ".tar.gz",
		},
		git: map[string][]string{
			"refs": {"for-each-ref"}, "tree": {"ls-tree", "-l", head}, "blob": {"cat-file", "-p", blob},
			"log": {"log", "-n50", "--first-parent", head}, "commit": {"show", "--patch", head},
			"archive": {"archive", "--format=tar.gz", head},
		},
	}, nil
}

// gitP50 runs git args n times in dir and returns the median in ms.
func gitP50(ctx context.Context, dir string, args []string, n int) (float64, error) {
	var ms []float64
	for range n {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env, cmd.Stdout = dir, fixture.GitEnv(), io.Discard
		s, err := runTimed(cmd)
		if err != nil {
			return 0, err
		}
		ms = append(ms, s.secs*1000)
	}
	return p50(ms), nil
}

func p50(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// benchAPIOn starts a node, pushes the fixture into a public repository
// and measures every op.
func benchAPIOn(ctx context.Context, f *fixture.Fixture, env rgitEnv, cache string, ops []string, t apiTarget, gitMS map[string]float64, n int) error {
	srv, err := startRgit(ctx, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	token, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return err
	}
	if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+f.Name); err != nil {
		return err
	}
	if _, err := timeGit(ctx, f.Dir, "push", "-q", "--mirror", srv.url(token, f.Name)); err != nil {
		return err
	}
	if _, err := srv.admin(ctx, "set-visibility", benchOwner+"/"+f.Name, "public"); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	base := "http://" + srv.httpAddr + "/api/" + benchOwner + "/" + f.Name + "/"
	for _, op := range ops {
		url := base + t.api[op]
		// One untimed request: opens the repository (and fills the cache).
		if err := apiGet(ctx, client, url, cache == "redis" && op != "archive"); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		var ms []float64
		for range n {
			start := time.Now()
			if err := apiGet(ctx, client, url, false); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		rps, err := apiRPS(ctx, client, url)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		rg := p50(ms)
		fmt.Printf("bench op=api-%s fixture=%s cache=%s rgit_ms=%.3f git_ms=%.3f ratio=%.3f rps=%.0f\n",
			op, f.Name, cache, rg, gitMS[op], rg/gitMS[op], rps)
	}
	return nil
}

// apiGet fetches url and drains the body; warm also waits until the
// answer is a cache hit (the store is asynchronous to nothing, but the
// refs answer expires in 5 s and is written after the answer).
func apiGet(ctx context.Context, c *http.Client, url string, warm bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if warm {
		return apiGet(ctx, c, url, false)
	}
	return nil
}

// apiRPS runs apiWorkers clients against url for apiRPSTime.
func apiRPS(ctx context.Context, c *http.Client, url string) (float64, error) {
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, apiWorkers)
	deadline := time.Now().Add(apiRPSTime)
	start := time.Now()
	for i := range apiWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := apiGet(ctx, c, url, false); err != nil {
					errs[i] = err
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(count.Load()) / time.Since(start).Seconds(), errors.Join(errs...)
}

// startRedis runs a redis-server with the policy the cache requires.
func startRedis(work string) (string, func(), error) {
	port, err := freeport.Run(1)
	if err != nil {
		return "", nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", work, "--maxmemory-policy", "volatile-lru")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start redis-server (apt-get install redis-server): %w", err)
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "redis://" + addr + "/0", stop, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("redis-server did not start listening within 4s")
}
