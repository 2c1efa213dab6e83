package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/fixture"
)

// Pack maintenance (issue 17): n small pushes over smart HTTP to one
// repository of a running node (`rgit serve`, default settings, so
// background roll-ups on), then:
//
//	maint op=pushes n=<N> packs_after=<P> open_fds=<F> rss_mb=<M>
//	maint op=fetch-after-pushes n=<N> rgit_s=<X> packed_s=<Y> ratio=<X/Y>
//
// packs_after is the repository's pack list once maintenance has nothing
// left to roll up; open_fds the node's descriptors open on pack files;
// rss_mb its RSS then (VmRSS read before the bench asks for anything, so
// no collection is forced; the node's own idle trimmer, admission.Trimmer,
// may have returned memory at one of its 10-second checks, as it does in
// production). The fetch brings a client from push n/2 to the tip,
// from the pushed repository and from a copy of the same history pushed
// in one go (one pack), on the same node; the median of -runs fetches
// after one untimed warm-up each.
// Targets: packs_after ≤ 12, open_fds ≤ 64, ratio ≤ 1.2, and rss_mb
// within 1.2x of the RSS after the first 100 pushes (a note on stderr).

const (
	maintFiles = 40 // files the pushes edit in turn
	maintRSSAt = 100
)

func runMaint(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("maint", flag.ExitOnError)
	n := fs.Int("n", 1000, "pushes")
	nRuns := fs.Int("runs", 15, "fetches per side (the median is reported)")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	dir := fs.String("dir", fixture.DefaultDir(), "scratch directory base (default $RGIT_BENCH_DIR or ./bench/fixtures)")
	profile := fs.String("profile", "", "write the node's heap profiles (after the first 100 pushes and after all) and CPU profiles of fetches from each side to this directory")
	fs.Parse(args)
	if *n < 2 || *nRuns < 1 {
		return errors.New("-n must be at least 2 and -runs at least 1")
	}
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	work, err := scratchDir(*dir, "maint-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	storeURL := "file://" + filepath.Join(work, "store")
	srv, err := startRgit(ctx, rgitEnv{bin: bin, storeURL: storeURL,
		cacheDir: filepath.Join(work, "cache"), hostKey: filepath.Join(work, "host_key")})
	if err != nil {
		return err
	}
	err = benchMaint(ctx, srv, storeURL, work, *n, *nRuns, *profile)
	if _, serr := srv.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%w\nrgit log:\n%s", err, lastLines(srv.log.Bytes(), 15))
	}
	return nil
}

func benchMaint(ctx context.Context, srv *rgitServer, storeURL, work string, n, nRuns int, profile string) error {
	token, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return err
	}
	for _, name := range []string{"pushed", "packed"} {
		if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+name); err != nil {
			return err
		}
	}
	store, err := storeurl.Open(ctx, storeURL, storeurl.Options{})
	if err != nil {
		return err
	}
	deps := repo.Deps{Store: store}
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	src := filepath.Join(work, "src")
	if _, err := fixture.Git(ctx, work, nil, "init", "-q", "-b", "main", src); err != nil {
		return err
	}
	url := srv.url(token, "pushed")
	var mid string
	var at100 memPoint
	start := time.Now()
	for i := 1; i <= n; i++ {
		if err := maintCommit(ctx, src, i); err != nil {
			return err
		}
		if _, err := fixture.Git(ctx, src, nil, "push", "-q", url, "main"); err != nil {
			return fmt.Errorf("push %d: %w", i, err)
		}
		if i == n/2 {
			if mid, err = revParse(ctx, src, "HEAD"); err != nil {
				return err
			}
		}
		if i == min(maintRSSAt, n) {
			if at100, err = srv.memPoint(ctx, pid, profile, "heap-100.pb.gz"); err != nil {
				return err
			}
		}
	}
	pushSecs := time.Since(start).Seconds()
	packs, err := settledPacks(ctx, deps, "pushed")
	if err != nil {
		return err
	}
	fds, packFDs := openFDs(pid)
	at, err := srv.memPoint(ctx, pid, profile, fmt.Sprintf("heap-%d.pb.gz", n))
	if err != nil {
		return err
	}
	fmt.Printf("maint op=pushes n=%d packs_after=%d open_fds=%d rss_mb=%.0f\n", n, len(packs), packFDs, float64(at.rss)/1024)
	// Then, after 100 and after n pushes: RSS in two parts, anonymous
	// memory (heap, stacks) and file pages (the binary's code as paths
	// first run, mapped pack indexes); RSS again once the node collected
	// garbage (the last roll-up's, at the end); and the Go heap.
	fmt.Fprintf(os.Stderr, "  note op=pushes push_s=%.1f rss_after_%d_mb=%.0f rss_ratio=%.2f all_fds=%d rss_anon_mb=%.0f/%.0f rss_file_mb=%.0f/%.0f rss_after_gc_mb=%.0f/%.0f rss_after_gc_ratio=%.2f\n",
		pushSecs, min(maintRSSAt, n), float64(at100.rss)/1024, float64(at.rss)/float64(max(at100.rss, 1)), fds,
		float64(at100.anon)/1024, float64(at.anon)/1024, float64(at100.file)/1024, float64(at.file)/1024,
		float64(at100.rssGC)/1024, float64(at.rssGC)/1024, float64(at.rssGC)/float64(max(at100.rssGC, 1)))
	fmt.Fprintf(os.Stderr, "  note op=pushes heap_inuse_mb=%.1f/%.1f heap_sys_mb=%.1f/%.1f heap_released_mb=%.1f/%.1f\n",
		mb(at100.heap["HeapInuse"]), mb(at.heap["HeapInuse"]), mb(at100.heap["HeapSys"]), mb(at.heap["HeapSys"]),
		mb(at100.heap["HeapReleased"]), mb(at.heap["HeapReleased"]))

	// The fully packed copy: the same history in one push, one pack.
	packedURL := srv.url(token, "packed")
	if _, err := fixture.Git(ctx, src, nil, "push", "-q", packedURL, "main"); err != nil {
		return err
	}
	packs1, err := repo.ReadPacks(ctx, deps, names.MustParse(benchOwner+"/"+"packed"))
	if err != nil || len(packs1) != 1 {
		return fmt.Errorf("packed copy has %d packs (%v), want 1", len(packs1), err)
	}
	tip, err := revParse(ctx, src, "HEAD")
	if err != nil {
		return err
	}
	template := filepath.Join(work, "client.git")
	if _, err := fixture.Git(ctx, work, nil, "init", "-q", "--bare", template); err != nil {
		return err
	}
	if _, err := fixture.Git(ctx, template, nil, "fetch", "-q", "file://"+src, mid+":refs/heads/main"); err != nil {
		return err
	}
	var pushed, packed []fetchSample
	// One untimed fetch per side first: both repositories are then warm
	// (packs cached and open, indexes mapped), as a busy server's are.
	for _, u := range []string{url, packedURL} {
		if _, err := timedFetch(ctx, template, filepath.Join(work, "client"), u, tip); err != nil {
			return err
		}
	}
	for range nRuns {
		for _, side := range []struct {
			url string
			out *[]fetchSample
		}{{url, &pushed}, {packedURL, &packed}} {
			cpu0 := procCPUTicks(pid)
			s, err := timedFetch(ctx, template, filepath.Join(work, "client"), side.url, tip)
			if err != nil {
				return err
			}
			s.serverTicks = procCPUTicks(pid) - cpu0
			*side.out = append(*side.out, s)
		}
	}
	if profile != "" {
		for _, side := range []struct{ url, name string }{{url, "pushed"}, {packedURL, "packed"}} {
			if err := srv.profileFetches(ctx, filepath.Join(profile, "cpu-fetch-"+side.name+".pb.gz"), func() error {
				_, err := timedFetch(ctx, template, filepath.Join(work, "client"), side.url, tip)
				return err
			}); err != nil {
				return err
			}
		}
	}
	x, y := median(samples(pushed)), median(samples(packed))
	fmt.Printf("maint op=fetch-after-pushes n=%d rgit_s=%.3f packed_s=%.3f ratio=%.2f\n", n, x, y, x/y)
	pp, err := repo.ReadPacks(ctx, deps, names.MustParse(benchOwner+"/"+"pushed"))
	if err != nil {
		return err
	}
	// The node's own CPU time over all timed fetches of each side: less
	// sensitive to the machine's load than the clients' wall time.
	fmt.Fprintf(os.Stderr, "  note op=fetch-after-pushes rgit_runs=%s packed_runs=%s stored_kb=%d packed_stored_kb=%d fetched_kb=%d packed_fetched_kb=%d server_cpu_ticks=%d packed_server_cpu_ticks=%d\n",
		runs(samples(pushed)), runs(samples(packed)), packBytes(pp)>>10, packBytes(packs1)>>10, pushed[0].bytes>>10, packed[0].bytes>>10,
		serverTicks(pushed), serverTicks(packed))
	return nil
}

// maintCommit edits one file (a new line at the end, so consecutive
// versions delta well) and commits.
func maintCommit(ctx context.Context, dir string, i int) error {
	path := filepath.Join(dir, fmt.Sprintf("f%02d.txt", i%maintFiles))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "push %d: %s\n", i, strings.Repeat("x", 60))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, err := fixture.Git(ctx, dir, nil, "add", "-A"); err != nil {
		return err
	}
	_, err = fixture.Git(ctx, dir, nil, "commit", "-q", "-m", fmt.Sprint("push ", i))
	return err
}

func revParse(ctx context.Context, dir, rev string) (string, error) {
	out, err := fixture.Git(ctx, dir, nil, "rev-parse", rev)
	return strings.TrimSpace(string(out)), err
}

// settledPacks waits until background maintenance has nothing left to
// roll up in the repository (the plan over its recorded packs is empty)
// and returns the packs.
func settledPacks(ctx context.Context, deps repo.Deps, name string) ([]repo.PackInfo, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		packs, err := repo.ReadPacks(ctx, deps, names.MustParse(benchOwner+"/"+name))
		if err != nil {
			return nil, err
		}
		if repo.PlanGeometric(packs, repo.GeometricFactor) == nil {
			return packs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("maintenance did not settle in 2 minutes: %d packs", len(packs))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fetchSample is one timed fetch, the pack bytes it brought and the CPU
// time the node spent meanwhile.
type fetchSample struct {
	sample
	bytes       int64
	serverTicks int64
}

func serverTicks(fs []fetchSample) int64 {
	var n int64
	for _, f := range fs {
		n += f.serverTicks
	}
	return n
}

// procCPUTicks is a process's user plus system CPU time in clock ticks
// (fields 14 and 15 of /proc/<pid>/stat).
func procCPUTicks(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

func packBytes(packs []repo.PackInfo) int64 {
	var n int64
	for _, p := range packs {
		n += p.Size
	}
	return n
}

// timedFetch copies the client template to dst and times one fetch of
// main from url, checking that the client then has tip.
func timedFetch(ctx context.Context, template, dst, url, tip string) (fetchSample, error) {
	os.RemoveAll(dst)
	defer os.RemoveAll(dst)
	if out, err := exec.CommandContext(ctx, "cp", "-al", template, dst).CombinedOutput(); err != nil {
		return fetchSample{}, fmt.Errorf("copy fetch client: %w: %s", err, out)
	}
	before := dirBytes(filepath.Join(dst, "objects", "pack"))
	s, err := timeGit(ctx, dst, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.unpackLimit=1",
		"fetch", "-q", url, "+refs/heads/main:refs/heads/main")
	fs := fetchSample{sample: s, bytes: dirBytes(filepath.Join(dst, "objects", "pack")) - before}
	if err != nil {
		return fs, err
	}
	got, err := revParse(ctx, dst, "refs/heads/main")
	if err == nil && got != tip {
		err = fmt.Errorf("fetched main %s, want %s", got, tip)
	}
	return fs, err
}

// dirBytes is the size of the .pack files in dir.
func dirBytes(dir string) int64 {
	des, _ := os.ReadDir(dir)
	var n int64
	for _, de := range des {
		if info, err := de.Info(); err == nil && strings.HasSuffix(de.Name(), ".pack") {
			n += info.Size()
		}
	}
	return n
}

// openFDs counts a process's open descriptors, all and those on pack files.
func openFDs(pid string) (all, packs int) {
	des, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return -1, -1
	}
	for _, de := range des {
		all++
		if target, err := os.Readlink("/proc/" + pid + "/fd/" + de.Name()); err == nil && strings.HasSuffix(target, ".pack") {
			packs++
		}
	}
	return all, packs
}

func samples(fs []fetchSample) []sample {
	out := make([]sample, len(fs))
	for i, f := range fs {
		out[i] = f.sample
	}
	return out
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// memPoint is the node's memory at one point of the push loop, in kB
// (heap: runtime.MemStats in bytes).
type memPoint struct {
	rss, anon, file int64
	rssGC           int64 // RSS once the node collected garbage
	heap            map[string]int64
}

func (s *rgitServer) memPoint(ctx context.Context, pid, dir, name string) (memPoint, error) {
	m := memPoint{rss: procStatusKB(pid, "VmRSS:"), anon: procStatusKB(pid, "RssAnon:"), file: procStatusKB(pid, "RssFile:")}
	var err error
	m.heap, err = s.heapStats(ctx, dir, name)
	m.rssGC = procStatusKB(pid, "VmRSS:")
	return m, err
}

// heapStats collects garbage in the node and returns its runtime.MemStats
// (the "# Name = value" lines of the debug heap profile); with dir set it
// also saves the heap profile there as name.
func (s *rgitServer) heapStats(ctx context.Context, dir, name string) (map[string]int64, error) {
	text, err := s.pprof(ctx, "heap?gc=1&debug=1")
	if err != nil {
		return nil, err
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(string(text), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			stats[k] = n
		}
	}
	if dir == "" {
		return stats, nil
	}
	prof, err := s.pprof(ctx, "heap")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), prof, 0o644)
	}
	return stats, err
}

// profileFetches records a CPU profile of the node while fetch runs in a
// loop for a few seconds, and saves it at path.
func (s *rgitServer) profileFetches(ctx context.Context, path string, fetch func() error) error {
	const secs = 8
	type result struct {
		prof []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		prof, err := s.pprof(ctx, "profile?seconds="+strconv.Itoa(secs))
		done <- result{prof, err}
	}()
	deadline := time.Now().Add(secs * time.Second)
	for time.Now().Before(deadline) {
		if err := fetch(); err != nil {
			return err
		}
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	return os.WriteFile(path, r.prof, 0o644)
}

// pprof gets /debug/pprof/<what> from the node's admin listener.
func (s *rgitServer) pprof(ctx context.Context, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.adminAddr+"/debug/pprof/"+what, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pprof %s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("pprof %s: %s: %s", what, resp.Status, body)
	}
	return body, err
}
