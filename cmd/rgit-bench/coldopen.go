package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// The cold-open benchmark: many repositories on one node, more than
// RGIT_MAX_WARM, read uniformly at random, so nearly every request opens
// a repository that is not warm, against a store with a fixed latency per
// call. Line per repository count:
//
//	load op=cold-open repos=<N> ops_per_sec=<X> p99_ms=<Y> rss_mb=<M>
//
// and a note with the median and the store calls per request by kind.
// Every repository holds one commit in a pack of its own; the node's pack
// cache directory already has every pack (a node that has served them
// before), so what is measured is the repository open, not a download.
// The node runs in a child process (cold-open-serve: rgit's serve package in
// process, its store a file store behind a fault store adding the
// latency), so rss_mb is the node's alone; the file store's data sits in
// the page cache, as an object store's would sit elsewhere.

type coldFlags struct {
	commonFlags
	repos    string
	latency  time.Duration
	maxWarm  int
	clients  int
	duration time.Duration
	serial   int
	cpuprof  string
	work     string
}

func runColdOpen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cold-open", flag.ExitOnError)
	var c coldFlags
	c.register(fs, "small")
	fs.StringVar(&c.repos, "repos", "1000,10000", "comma-separated repository counts, ascending (one run each)")
	fs.DurationVar(&c.latency, "latency", 20*time.Millisecond, "latency of every store call")
	fs.IntVar(&c.maxWarm, "max-warm", 64, "RGIT_MAX_WARM of the node")
	fs.IntVar(&c.clients, "clients", 16, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "how long each count is loaded")
	fs.IntVar(&c.serial, "serial", 100, "requests made one at a time first (the open's own latency, without queueing)")
	fs.StringVar(&c.work, "work", "", "directory for the store and the pack cache (default: under -dir); a tmpfs such as /dev/shm leaves out the disk's fsyncs, which the store's fixed latency does not model")
	fs.StringVar(&c.cpuprof, "cpuprofile", "", "write the node's CPU profile of each loaded phase to this path with -<repos> appended")
	fs.Parse(args)
	var counts []int
	for _, s := range strings.Split(c.repos, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || len(counts) > 0 && n < counts[len(counts)-1] {
			return fmt.Errorf("-repos: want ascending positive counts, got %q", c.repos)
		}
		counts = append(counts, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var work string
	if c.work != "" {
		work, err = os.MkdirTemp(c.work, "cold-work-")
	} else {
		work, err = c.workDir("cold-work-")
	}
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	storeDir, cacheDir := filepath.Join(work, "store"), filepath.Join(work, "cache")
	store, err := filestore.New(storeDir)
	if err != nil {
		return err
	}
	token, err := auth.NewStore(store).CreateToken(ctx, benchOwner)
	if err != nil {
		return err
	}
	made := 0
	for _, n := range counts {
		// Each count adds repositories to those of the last.
		t0 := time.Now()
		if err := makeColdRepos(ctx, store, cacheDir, made, n); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "cold: %d repositories made in %.1fs\n", n-made, time.Since(t0).Seconds())
		made = n
		if err := c.runCount(ctx, self, storeDir, cacheDir, token, n); err != nil {
			return err
		}
	}
	return nil
}

func coldName(i int) string { return fmt.Sprintf("cold-%05d", i) }

// makeColdRepos creates repositories [from, to), each with one commit of
// its own in one pack, and puts every pack into the pack cache at
// cacheDir.
func makeColdRepos(ctx context.Context, store *filestore.Store, cacheDir string, from, to int) error {
	d := repo.Deps{Store: store, Log: zap.NewNop()}
	cache, err := packcache.Open(cacheDir, store, zap.NewNop())
	if err != nil {
		return err
	}
	defer cache.Close()
	tmp, err := os.MkdirTemp(cacheDir, "make-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				if err := makeColdRepo(ctx, d, cache, tmp, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs, ctx.Err())
}

func makeColdRepo(ctx context.Context, d repo.Deps, cache *packcache.Cache, tmp string, i int) error {
	name := names.MustParse(benchOwner + "/" + coldName(i))
	if err := repo.Create(ctx, d, name); err != nil {
		return err
	}
	packBytes, commit := oneCommitPack(fmt.Sprintf("repository %d\n", i))
	ix, err := pack.IndexPack(ctx, bytes.NewReader(packBytes), tmp, pack.IndexOptions{})
	if err != nil {
		return err
	}
	defer os.Remove(ix.PackPath)
	defer os.Remove(ix.IdxPath)
	info, err := repo.StagePack(ctx, d, name, ix)
	if err != nil {
		return err
	}
	r, err := repo.Open(ctx, d, name)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	res, err := r.UpdateRefs(ctx, &info, []repo.RefUpdate{{Name: "refs/heads/main", New: commit}}, true)
	if err == nil {
		err = errors.Join(res...)
	}
	if err != nil {
		return err
	}
	pk, ik := repo.PackKeys(name, info.Name)
	_, release, err := cache.Get(ctx, pk, ik, info.Name)
	if err != nil {
		return err
	}
	release()
	return nil
}

// oneCommitPack is a pack of the empty tree and one commit with message
// msg (distinct messages, distinct packs), and the commit's id.
func oneCommitPack(msg string) ([]byte, object.ID) {
	const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	commit := []byte("tree " + emptyTree + "\nauthor Bench <bench@example.com> 1700000000 +0000\n" +
		"committer Bench <bench@example.com> 1700000000 +0000\n\n" + msg)
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(2))
	for _, o := range []struct {
		t    object.Type
		data []byte
	}{{object.Tree, nil}, {object.Commit, commit}} {
		// Entry header: type and size, 4 bits then 7 per byte.
		size := len(o.data)
		c := byte(o.t)<<4 | byte(size&15)
		size >>= 4
		for size > 0 {
			b.WriteByte(c | 0x80)
			c = byte(size & 127)
			size >>= 7
		}
		b.WriteByte(c)
		zw := zlib.NewWriter(&b)
		zw.Write(o.data)
		zw.Close()
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), object.Hash(object.Commit, commit)
}

// runCount loads a node serving n repositories and prints its line.
func (c *coldFlags) runCount(ctx context.Context, self, storeDir, cacheDir, token string, n int) error {
	child, err := startColdServe(ctx, self, storeDir, cacheDir, c.latency, c.maxWarm)
	if err != nil {
		return err
	}
	defer child.stop()
	tr := &http.Transport{MaxIdleConnsPerHost: c.clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	urlOf := func(i int) string {
		return "http://" + benchOwner + ":" + token + "@" + child.addr + "/" + benchOwner + "/" + coldName(i) + ".git"
	}
	var serial opStats
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for range c.serial {
		t0 := time.Now()
		err := lsRemote(ctx, hc, urlOf(rng.IntN(n)), " refs/heads/main")
		serial.record(time.Since(t0), err)
	}
	if _, err := child.stats(); err != nil { // resets the store call counts
		return err
	}
	if c.cpuprof != "" {
		if err := child.startProfile(fmt.Sprintf("%s-%d", c.cpuprof, n)); err != nil {
			return err
		}
	}
	var st opStats
	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for id := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), uint64(n)))
			for runCtx.Err() == nil {
				t0 := time.Now()
				err := lsRemote(ctx, hc, urlOf(rng.IntN(n)), " refs/heads/main")
				st.record(time.Since(t0), err)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	stats, err := child.stats()
	if err != nil {
		return err
	}
	lat, slat := slices.Clone(st.lat), slices.Clone(serial.lat)
	slices.Sort(lat)
	slices.Sort(slat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("load op=cold-open repos=%d ops_per_sec=%.1f p99_ms=%.1f rss_mb=%.0f\n",
		n, float64(len(lat))/secs, ms(percentile(lat, 99)), float64(stats.rssKB)/1024)
	reqs := float64(max(len(lat)+st.errors, 1))
	fmt.Fprintf(os.Stderr, "  note op=cold-open repos=%d clients=%d requests=%d errors=%d p50_ms=%.1f max_ms=%.1f latency_ms=%.0f hwm_mb=%.0f store_calls_per_request=%.2f (%s)\n",
		n, c.clients, len(lat), st.errors, ms(percentile(lat, 50)), ms(percentile(lat, 100)), ms(c.latency), float64(stats.hwmKB)/1024, float64(stats.calls)/reqs, stats.byOp)
	fmt.Fprintf(os.Stderr, "  note op=cold-open repos=%d clients=1 requests=%d errors=%d p50_ms=%.1f p99_ms=%.1f\n",
		n, len(slat), serial.errors, ms(percentile(slat, 50)), ms(percentile(slat, 99)))
	for _, e := range append(st.first, serial.first...) {
		fmt.Fprintf(os.Stderr, "  error op=cold-open: %s\n", e)
	}
	return nil
}

// coldServe is a running cold-open-serve child.
type coldServe struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
	log  bytes.Buffer
}

func startColdServe(ctx context.Context, self, storeDir, cacheDir string, latency time.Duration, maxWarm int) (*coldServe, error) {
	httpPort, err := freeport.Run(1)
	if err != nil {
		return nil, err
	}
	peerPort, err := freeport.Run(2)
	if err != nil {
		return nil, err
	}
	s := &coldServe{cmd: exec.CommandContext(ctx, self, "cold-open-serve", "-latency", latency.String())}
	s.addr = "127.0.0.1:" + strconv.Itoa(httpPort)
	s.cmd.Env = append(os.Environ(),
		"RGIT_STORE_URL=file://"+storeDir,
		"RGIT_CACHE_DIR="+cacheDir,
		"RGIT_HOST_KEY="+filepath.Join(cacheDir, "host_key"),
		"RGIT_HTTP_ADDR="+s.addr,
		"RGIT_SSH_ADDR=127.0.0.1:0",
		"RGIT_PEER_ADDR=127.0.0.1:"+strconv.Itoa(peerPort),
		"RGIT_MAX_WARM="+strconv.Itoa(maxWarm),
		"RGIT_GC_INTERVAL_SECS=0",
		"RGIT_MAINTENANCE_INTERVAL_SECS=0",
	)
	if s.in, s.out, err = startPiped(s.cmd, &s.log); err != nil {
		return nil, err
	}
	if !s.out.Scan() || s.out.Text() != "ready" {
		s.stop()
		return nil, fmt.Errorf("cold-open-serve did not start: %s", lastLines(s.log.Bytes(), 10))
	}
	return s, nil
}

type coldStats struct {
	rssKB, hwmKB, calls int64
	byOp                string
}

// startProfile has the child write its CPU profile to path until the next
// stats.
func (s *coldServe) startProfile(path string) error {
	fmt.Fprintln(s.in, "profile "+path)
	if !s.out.Scan() || s.out.Text() != "profiling" {
		return fmt.Errorf("cold-open-serve: profile %s: %s", path, lastLines(s.log.Bytes(), 10))
	}
	return nil
}

// stats asks the child for its memory and the store calls since the last
// stats (or its start).
func (s *coldServe) stats() (coldStats, error) {
	fmt.Fprintln(s.in, "stats")
	if !s.out.Scan() {
		return coldStats{}, fmt.Errorf("cold-open-serve: no stats: %s", lastLines(s.log.Bytes(), 10))
	}
	var st coldStats
	var rest []string
	for _, f := range strings.Fields(s.out.Text()) {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rss_kb":
			st.rssKB = n
		case "hwm_kb":
			st.hwmKB = n
		default:
			st.calls += n
			rest = append(rest, f)
		}
	}
	st.byOp = strings.Join(rest, " ")
	return st, nil
}

func (s *coldServe) stop() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-done
	}
}

// runColdOpenServe is the child: a node whose store adds latency to every
// call. It prints "ready" once serving; each "stats" line on stdin gets
// one line of VmRSS, VmHWM and the store calls made since the last one;
// "profile <path>" starts a CPU profile that the next "stats" ends; end of
// input stops it.
func runColdOpenServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cold-open-serve", flag.ExitOnError)
	latency := fs.Duration("latency", 20*time.Millisecond, "latency of every store call")
	fs.Parse(args)
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	inner, err := storeurl.Open(ctx, cfg.StoreURL, storeurl.Options{})
	if err != nil {
		return err
	}
	store := faultstore.New(inner, 1)
	srv, err := node.Start(ctx, cfg, zap.NewNop(), node.WithStore(store))
	if err != nil {
		return err
	}
	store.AddRule(faultstore.Rule{Latency: *latency})
	store.ResetCounts()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	var prof *os.File
	for in.Scan() {
		if path, ok := strings.CutPrefix(in.Text(), "profile "); ok && prof == nil {
			if prof, err = os.Create(path); err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				return err
			}
			fmt.Println("profiling")
			continue
		}
		if in.Text() != "stats" {
			continue
		}
		if prof != nil {
			pprof.StopCPUProfile()
			if err := prof.Close(); err != nil {
				return err
			}
			prof = nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "rss_kb=%d hwm_kb=%d", procStatusKB("self", "VmRSS:"), ownHWM())
		for _, op := range faultstore.Ops() {
			if n := store.Count(op); n > 0 {
				fmt.Fprintf(&b, " %s=%d", op, n)
			}
		}
		fmt.Println(b.String())
		store.ResetCounts()
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return srv.Shutdown(sctx)
}
