package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
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

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/freeport"
)

// The read-API benchmark (make bench-api): each endpoint timed over HTTP
// against a running node, next to the C git plumbing command that
// computes the same answer, run as a process on the same repository:
//
//	bench op=api-<op> fixture=<f> cache=off rgit_ms=<p50> git_ms=<p50> ratio=<r> rps=<X> rgit=keepalive-server ref=git-process
//	bench op=api-<op> fixture=<f> cache=redis rgit_ms=<p50> rps=<X> rgit=cache-hit ref=none
//
// cache=off is a node without RGIT_REDIS_URL (every answer computed),
// timed request by request in turn with the git command. The comparison
// is asymmetric and says so: rgit answers on a warm server over a
// keep-alive connection, git starts a process per call (there is no git
// server for these answers). The archive is gzip level 1 on both sides
// (git archive -1). cache=redis is a node with a local redis-server after
// one warming request (every answer a hit): a cache hit is no ratio
// against git, so that line has none. rps is requests per second with
// apiWorkers clients on keep-alive connections for apiRPSTime. Every
// endpoint's first answer is checked against git's (ids, names, file
// contents), so a bench that measures a wrong answer fails.
var apiOps = []string{"refs", "tree", "blob", "log", "commit", "archive"}

const apiWorkers = 8

type apiFlags struct {
	commonFlags
	rgitBin string
	caches  string
	ops     string
	n       int
	rpsTime time.Duration
}

func runAPI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("api", flag.ExitOnError)
	var c apiFlags
	c.register(fs, "small,large")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.StringVar(&c.caches, "caches", "off,redis", "cache settings to run: off, redis (needs redis-server)")
	fs.IntVar(&c.n, "n", 41, "timed requests per endpoint (the median is reported)")
	fs.StringVar(&c.ops, "ops", strings.Join(apiOps, ","), "endpoints to measure")
	fs.DurationVar(&c.rpsTime, "rps-time", 2*time.Second, "how long the rps clients run per endpoint")
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
			if err := benchAPIOn(ctx, f, env, cache, ops, targets, c.n, c.rpsTime); err != nil {
				return fmt.Errorf("%s cache=%s: %w", f.Name, cache, err)
			}
		}
	}
	return nil
}

// apiTarget is what each op asks: the API path and the git command.
type apiTarget struct {
	api   map[string]string // op → path after /api/bench/<name>/
	git   map[string][]string
	head  string
	files map[string]string // path → blob id of every file at head
	// blobPath is where the blob op's file is at head.
	blobPath string
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
	files, err := fixture.Git(ctx, f.Dir, nil, "ls-tree", "-r", "-z", head)
	if err != nil {
		return apiTarget{}, err
	}
	return apiTarget{
		head: head, files: parseLsTree(files), blobPath: path,
		api: map[string]string{
			"refs": "refs", "tree": "tree/" + head, "blob": "blob/" + blob, "log": "log/" + head + "?n=50",
			"commit": "commit/" + head, "archive": "archive/" + head + ".tar.gz",
		},
		git: map[string][]string{
			"refs": {"for-each-ref"}, "tree": {"ls-tree", "-l", head}, "blob": {"cat-file", "-p", blob},
			"log": {"log", "-n50", "--first-parent", head}, "commit": {"show", "--patch", head},
			"archive": {"archive", "--format=tar.gz", "-1", head},
		},
	}, nil
}

// gitOnce runs git args in dir and returns its time in ms and its output.
func gitOnce(ctx context.Context, dir string, args []string) (float64, []byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env, cmd.Stdout = dir, fixture.GitEnv(), &out
	s, err := runTimed(cmd)
	return s.secs * 1000, out.Bytes(), err
}

func p50(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// benchAPIOn starts a node, pushes the fixture into a public repository
// and measures every op: with cache "off" each timed request follows a
// run of the git command, so both series see the same load.
func benchAPIOn(ctx context.Context, f *fixture.Fixture, env rgitEnv, cache string, ops []string, t apiTarget, n int, rpsTime time.Duration) error {
	srv, err := startRgit(ctx, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := publishFixture(ctx, srv, f); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	base := "http://" + srv.httpAddr + "/api/" + benchOwner + "/" + f.Name + "/"
	for _, op := range ops {
		url := base + t.api[op]
		hit := cache == "redis" && op != "archive"
		// One untimed request, checked against git's answer: opens the
		// repository (and fills the cache).
		_, gitOut, err := gitOnce(ctx, f.Dir, t.git[op])
		if err != nil {
			return fmt.Errorf("%s: git side: %w", op, err)
		}
		body, err := apiGet(ctx, client, url, hit)
		if err == nil {
			err = verifyAPI(op, t, gitOut, body)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		var ms, gitMS []float64
		for range n {
			if !hit {
				g, _, err := gitOnce(ctx, f.Dir, t.git[op])
				if err != nil {
					return fmt.Errorf("%s: git side: %w", op, err)
				}
				gitMS = append(gitMS, g)
			}
			start := time.Now()
			if _, err := apiGet(ctx, client, url, false); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		rps, err := apiRPS(ctx, client, url, rpsTime)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		fmt.Println(apiLine(op, f.Name, cache, hit, p50(ms), gitMS, rps))
	}
	return nil
}

// apiLine formats one endpoint's result; a cache hit has no reference.
func apiLine(op, fx, cache string, hit bool, rg float64, gitMS []float64, rps float64) string {
	if hit {
		return fmt.Sprintf("bench op=api-%s fixture=%s cache=%s rgit_ms=%.3f rps=%.0f rgit=cache-hit ref=none", op, fx, cache, rg, rps)
	}
	g := p50(gitMS)
	return fmt.Sprintf("bench op=api-%s fixture=%s cache=%s rgit_ms=%.3f git_ms=%.3f ratio=%.3f rps=%.0f rgit=keepalive-server ref=git-process",
		op, fx, cache, rg, g, rg/g, rps)
}

// apiGet fetches url and returns its body; warm also waits until the
// answer is a cache hit (the store is asynchronous to nothing, but the
// refs answer expires in 5 s and is written after the answer).
func apiGet(ctx context.Context, c *http.Client, url string, warm bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if warm {
		return apiGet(ctx, c, url, false)
	}
	return body, nil
}

// apiRPS runs apiWorkers clients against url for d.
func apiRPS(ctx context.Context, c *http.Client, url string, d time.Duration) (float64, error) {
	var count atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, apiWorkers)
	deadline := time.Now().Add(d)
	start := time.Now()
	for i := range apiWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := apiGet(ctx, c, url, false); err != nil {
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

// ErrAPIAnswer: the read API answered something git disagrees with.
var ErrAPIAnswer = errors.New("read API answer differs from git's")

// parseLsTree reads `git ls-tree -r -z` output into path → blob id
// (submodule entries left out: archives skip them).
func parseLsTree(out []byte) map[string]string {
	files := map[string]string{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[1] == "blob" {
			files[path] = f[2]
		}
	}
	return files
}

// verifyAPI checks the API's answer to op against git's output for the
// same question: every id and name git lists appears in the JSON; the
// blob's content is git's; the archive holds exactly the files of the
// tree, each with its blob's bytes.
func verifyAPI(op string, t apiTarget, gitOut, body []byte) error {
	var want []string
	switch op {
	case "refs": // <id> <type>\t<ref>
		for _, l := range strings.Split(strings.TrimSpace(string(gitOut)), "\n") {
			id, ref, _ := strings.Cut(l, "\t")
			want = append(want, strings.Fields(id)[0], ref)
		}
	case "tree": // <mode> <type> <id> <size>\t<name>
		for _, l := range strings.Split(strings.TrimSpace(string(gitOut)), "\n") {
			meta, name, _ := strings.Cut(l, "\t")
			want = append(want, strings.Fields(meta)[2], name)
		}
	case "blob":
		var a struct {
			Content   string `json:"content"`
			Binary    bool   `json:"binary"`
			Truncated bool   `json:"truncated"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("%w: blob: %v", ErrAPIAnswer, err)
		}
		if a.Binary || a.Truncated || a.Content != string(gitOut) {
			return fmt.Errorf("%w: blob content (%d bytes, binary %v, truncated %v), git cat-file has %d bytes",
				ErrAPIAnswer, len(a.Content), a.Binary, a.Truncated, len(gitOut))
		}
		return nil
	case "log", "commit": // "commit <id>" headers; commit's diff names its files
		for _, l := range strings.Split(string(gitOut), "\n") {
			if id, ok := strings.CutPrefix(l, "commit "); ok {
				want = append(want, id)
			}
			if op == "commit" {
				if p, ok := strings.CutPrefix(l, "+++ b/"); ok {
					want = append(want, p)
				}
			}
		}
	case "archive":
		return verifyArchive(t.files, body)
	default:
		return fmt.Errorf("verifyAPI: unknown op %q", op)
	}
	if len(want) == 0 {
		return fmt.Errorf("%w: %s: git's answer is empty", ErrAPIAnswer, op)
	}
	for _, w := range want {
		if !bytes.Contains(body, []byte(w)) {
			return fmt.Errorf("%w: %s: the answer lacks %q, which git lists", ErrAPIAnswer, op, w)
		}
	}
	return nil
}

// verifyArchive checks a tar.gz: its regular files (below the one
// top-level directory) are exactly files, each holding its blob.
func verifyArchive(files map[string]string, tgz []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return fmt.Errorf("%w: archive: %v", ErrAPIAnswer, err)
	}
	tr := tar.NewReader(gz)
	seen := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: archive: %v", ErrAPIAnswer, err)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink {
			continue
		}
		_, path, _ := strings.Cut(h.Name, "/")
		data := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			if data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("%w: archive: %s: %v", ErrAPIAnswer, h.Name, err)
			}
		}
		want, ok := files[path]
		if !ok {
			return fmt.Errorf("%w: archive holds %s, not in the tree", ErrAPIAnswer, path)
		}
		if got := object.Hash(object.Blob, data).String(); got != want {
			return fmt.Errorf("%w: archive: %s is blob %s, the tree has %s", ErrAPIAnswer, path, got, want)
		}
		seen++
	}
	if seen != len(files) {
		return fmt.Errorf("%w: archive holds %d files, the tree %d", ErrAPIAnswer, seen, len(files))
	}
	return nil
}
