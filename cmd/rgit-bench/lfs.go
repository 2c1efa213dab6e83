package main

// rgit-bench lfs: Git LFS transfers through a node against the store's
// own speed, one line per store and direction:
//
//	lfs op=upload store=s3 objects=5 object_mb=20 rounds=3 concurrency=8 rgit_s=… direct_s=… ratio=… round_ratio_median=… round_ratio_range=…-… rgit_mbps=… direct_mbps=… payload_mb=300 node_io_mb=… control_ms=… rgit=lfs-presigned ref=presigned-direct
//	lfs op=upload store=file … rgit_s=… cp_sync_s=… ratio=… cp_s=… rgit_mbps=… cp_sync_mbps=… … rgit=lfs-node-served ref=cp-sync
//	lfs op=download store=file … rgit_s=… cp_s=… ratio=… … floor_s=… floor_ratio=… floor_round_ratio_median=… … rgit=lfs-node-served ref=cp
//
// ratio is time, rgit over the reference, as on every bench line (a
// throughput of at least 0.9 times the store's is a ratio of at most
// 1.11), over all rounds; round_ratio_median and _range are the same
// ratio per round (nearest-rank median), whose sides ran back to back, so
// that a slow moment of a shared machine spoils one round, not the
// figure.
//
// The rgit side is what git-lfs does, from a Go client so that only the
// server is measured: one batch request per operation for a round's
// objects (git-lfs asks for up to 100 at a time), then the transfers
// each action names on -concurrency workers (git-lfs's
// lfs.concurrenttransfers, 8 by default), each upload followed by its
// verify as it finishes. The clock of a side runs from its first request
// to its last answer. Object ids are computed
// before either side's clock starts (git-lfs hashes a file when it is
// added, not when it is pushed), and the round's setup is synced to disk
// before them too (its write-back would land on the first transfers). On S3 (versitygw) the transfer is a
// presigned URL of the store, and the baseline is a presigned PUT or GET
// of the same bytes that the bench signs itself, on as many workers; on the file store the
// node serves the transfer (hashing the upload and writing it durably:
// temp file, fsync, link), and the reference is `cp` of the same bytes
// on the same file system followed by `sync` of the copy for uploads
// (cp_s, without the sync, is printed beside it), `cp` to /dev/null for
// downloads, as many at once. The
// sides run one after the other, each synced and warmed before, and
// take turns at starting an operation; on S3 the same Go client moves the bytes on both
// sides. control_ms is the mean time per object of the requests to
// rgit that move no content (the batch, and the verify for uploads),
// summed over workers: what LFS adds to a transfer that the store does
// at its own speed. Other workers' transfers hide it only when there are
// more objects than workers; otherwise the batch and the slowest
// upload's verify are on the clock in full, as for git-lfs.
// node_io_mb is what the rgit process read and wrote through system
// calls (sockets and files, /proc/<pid>/io rchar+wchar, sendfile(2)
// counted as both) during the rgit side's transfers: on S3 a few
// requests' worth, on the file store a multiple of the payload.
//
// cp to /dev/null moves each byte once, with no socket and no client. The
// file store's downloads have a third side, the floor: a minimal net/http
// server in a process of its own (lfs-floor, as the node is one) that
// opens the stored file and io.Copy's it to the answer (sendfile(2)), GET
// by the same client on as many workers: what serving the bytes over
// HTTP costs on this machine at best. floor_s is its time, floor_ratio
// rgit's over it and floor_round_ratio_median the same per round; ratio
// stays against cp.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/fixture"
	"golang.org/x/sync/errgroup"
)

type lfsFlags struct {
	dir, stores, rgitBin string
	objects, mb, rounds  int
	concurrency          int
	trace                bool
}

func runLFS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lfs", flag.ExitOnError)
	var c lfsFlags
	fs.StringVar(&c.dir, "dir", fixture.DefaultDir(), "scratch directory (default $RGIT_BENCH_DIR or ./bench/fixtures)")
	fs.StringVar(&c.stores, "stores", "s3,file", "object stores: s3 (versitygw), file")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.IntVar(&c.objects, "objects", 5, "objects per round")
	fs.IntVar(&c.mb, "mb", 20, "size of each object in MB")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds (each uploads and downloads new objects)")
	fs.IntVar(&c.concurrency, "concurrency", 8, "transfers at once on each side (git-lfs's lfs.concurrenttransfers, 8 by default)")
	fs.BoolVar(&c.trace, "trace", false, "print every request's phases to stderr (connection reused, body written, first answer byte, done)")
	fs.Parse(args)
	if c.concurrency < 1 || c.objects < 1 {
		return fmt.Errorf("-concurrency and -objects must be at least 1")
	}
	lfsTrace = c.trace
	bin, err := rgitBinary(c.rgitBin)
	if err != nil {
		return err
	}
	work, err := scratchDir(c.dir, "lfs-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, store := range strings.Split(c.stores, ",") {
		if err := c.run(ctx, bin, work, store); err != nil {
			return fmt.Errorf("store %s: %w", store, err)
		}
	}
	return nil
}

// lfsSide is one way of moving an object: the store's own, or rgit's.
type lfsSide struct {
	up, down time.Duration
	io       [2]int64 // node I/O bytes: uploads, downloads
}

func (c *lfsFlags) run(ctx context.Context, bin, work, store string) error {
	env := rgitEnv{bin: bin, cacheDir: filepath.Join(work, "cache-"+store), hostKey: filepath.Join(work, "host_key")}
	var direct *s3store.Store
	switch store {
	case "file":
		env.storeURL = "file://" + filepath.Join(work, "store")
	case "s3":
		s3, err := startS3(work)
		if err != nil {
			return err
		}
		defer s3.Close()
		env.storeURL, env.extra = "s3://"+s3.Bucket+"/lfs", s3.Env()
		if direct, err = s3store.New(ctx, s3.Config("lfs")); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-stores: unknown store %q (want s3, file)", store)
	}
	srv, err := startRgit(ctx, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	if _, err := srv.admin(ctx, "create-repo", benchOwner+"/lfs"); err != nil {
		return err
	}
	out, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return err
	}
	lines := strings.Split(out, "\n")
	cl := &lfsClient{base: "http://" + srv.httpAddr + "/" + benchOwner + "/lfs.git/info/lfs", token: strings.TrimSpace(lines[len(lines)-1])}
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	lfsNodePID = pid

	var rg, base, baseSync, floor lfsSide
	var floorURL string
	if store == "file" {
		stop, url, err := startFloor(ctx, filepath.Join(work, "store", "objects", benchOwner, "lfs", "lfs"))
		if err != nil {
			return err
		}
		defer stop()
		floorURL = url
	}
	size := int64(c.mb) * 1e6
	// timedIO runs f, the rgit side of one operation, adding its time to
	// *d and the node's I/O to *io.
	timedIO := func(d *time.Duration, io *int64, f func() error) error {
		io0 := procIO(pid)
		err := c.timed(d, f)
		*io += procIO(pid) - io0
		return err
	}
	// warm moves one object to and from the store outside both clocks
	// (data: a PUT of it; nil: a GET of it): the first transfer after a
	// round's setup was 2 to 4 times slower than the rest (-trace),
	// whichever side made it. Nothing to warm on the file store (cp).
	warm := func(data []byte) error {
		switch {
		case direct == nil:
			return nil
		case data != nil:
			return presignedPut(ctx, direct, "direct/warm", sha256.Sum256(data), data)
		}
		return presignedGet(ctx, direct, "direct/warm", size)
	}
	// Each round's time on both sides of each operation, for the paired
	// per-round ratios (lfsResult.perRound).
	var rounds [2][]pairedRound
	for round := range c.rounds {
		before := [2]pairedRound{{rg.up, refUp(store, base, baseSync), 0}, {rg.down, base.down, floor.down}}
		objs := make([]lfsObject, c.objects)
		for i := range objs {
			data := make([]byte, size)
			rand.Read(data)
			// git-lfs hashes a file when it is added (the clean filter),
			// not when it is pushed: neither side's time includes it.
			sum := sha256.Sum256(data)
			objs[i] = lfsObject{data: data, sum: sum, oid: hex.EncodeToString(sum[:])}
			if store == "file" {
				objs[i].src = filepath.Join(work, fmt.Sprintf("src-%d.bin", i))
				if err := os.WriteFile(objs[i].src, data, 0o644); err != nil {
					return err
				}
			}
		}
		directKey := func(i int) string { return fmt.Sprintf("direct/%d-%d", round, i) }
		cp := func(i int, sync bool) error {
			name := fmt.Sprintf("cp-%d.bin", i)
			script := `cp "$1" "$2"`
			if sync {
				name, script = fmt.Sprintf("cp-sync-%d.bin", i), script+` && sync "$2"`
			}
			return exec.CommandContext(ctx, "sh", "-c", script, "sh", objs[i].src, filepath.Join(work, name)).Run()
		}
		// Each operation's sides, rgit's first: what git-lfs does (one
		// batch for the round's objects, then the transfers, each
		// upload followed by its verify as it finishes), and the same
		// transfers straight to the store, on as many workers.
		// rgitSide is rgit's side of operation k (0 upload, 1 download):
		// the batch, then transfer of each object with its actions.
		rgitSide := func(k int, d *time.Duration, transfer func(acts map[string]lfsAction, o lfsObject) error) func() error {
			return func() error {
				return timedIO(d, &rg.io[k], func() error {
					acts, err := cl.batch(ctx, []string{"upload", "download"}[k], objs)
					if err != nil {
						return fmt.Errorf("batch: %w", err)
					}
					return c.each(func(i int) error { return transfer(acts[i], objs[i]) })
				})
			}
		}
		upload := []func() error{rgitSide(0, &rg.up, func(acts map[string]lfsAction, o lfsObject) error { return cl.upload(ctx, acts, o) })}
		download := []func() error{rgitSide(1, &rg.down, func(acts map[string]lfsAction, _ lfsObject) error {
			return getWhole(ctx, acts["download"].Href, acts["download"].Header, size)
		})}
		if store == "s3" {
			upload = append(upload, func() error {
				return c.timed(&base.up, func() error {
					return c.each(func(i int) error { return presignedPut(ctx, direct, directKey(i), objs[i].sum, objs[i].data) })
				})
			})
			download = append(download, func() error {
				return c.timed(&base.down, func() error {
					return c.each(func(i int) error { return presignedGet(ctx, direct, directKey(i), size) })
				})
			})
		} else {
			upload = append(upload,
				func() error {
					return c.timed(&baseSync.up, func() error { return c.each(func(i int) error { return cp(i, true) }) })
				},
				func() error {
					return c.timed(&base.up, func() error { return c.each(func(i int) error { return cp(i, false) }) })
				})
			download = append(download,
				func() error {
					return c.timed(&base.down, func() error {
						return c.each(func(i int) error {
							stored := filepath.Join(work, "store", "objects", benchOwner, "lfs", "lfs", objs[i].oid)
							return exec.CommandContext(ctx, "cp", stored, "/dev/null").Run()
						})
					})
				},
				func() error {
					return c.timed(&floor.down, func() error {
						return c.each(func(i int) error { return getWhole(ctx, floorURL+"/"+objs[i].oid, nil, size) })
					})
				})
		}
		// The sides run one after the other, each on its own clock, rgit
		// first in even rounds' uploads and odd rounds' downloads and
		// last in the others, so neither side always starts a round.
		// Before each, the dirty pages left by the round's setup or the
		// side before are written (the kernel would write them back
		// under the next side's transfers) and the store is warmed.
		for k, sides := range [][]func() error{upload, download} {
			if (round+k)%2 == 1 {
				slices.Reverse(sides)
			}
			op := []string{"upload", "download"}[k]
			for _, side := range sides {
				syscall.Sync()
				runtime.GC()
				w := objs[0].data
				if k == 1 {
					w = nil
				}
				if err := warm(w); err != nil {
					return fmt.Errorf("warm-up: %w", err)
				}
				if err := side(); err != nil {
					return fmt.Errorf("%s: %w", op, err)
				}
			}
		}
		after := [2]pairedRound{{rg.up, refUp(store, base, baseSync), 0}, {rg.down, base.down, floor.down}}
		for k := range after {
			rounds[k] = append(rounds[k], pairedRound{after[k].rgit - before[k].rgit, after[k].ref - before[k].ref, after[k].floor - before[k].floor})
		}
	}
	n := c.rounds * c.objects
	for k, op := range []string{"upload", "download"} {
		r := lfsResult{op: op, store: store, objects: c.objects, mb: c.mb, rounds: c.rounds, concurrency: c.concurrency, perRound: rounds[k],
			payloadMB: float64(int64(n)*size) / 1e6, nodeIO: rg.io[k], control: time.Duration(cl.control[k].Load()) / time.Duration(n)}
		switch {
		case op == "upload" && store == "s3":
			r.rgit, r.ref, r.cmp = rg.up, base.up, lfsPresigned
		case op == "upload":
			// The node writes durably: cp and sync is the like.
			r.rgit, r.ref, r.noSync, r.cmp = rg.up, baseSync.up, base.up, lfsNodeUp
		case store == "s3":
			r.rgit, r.ref, r.cmp = rg.down, base.down, lfsPresigned
		default:
			r.rgit, r.ref, r.floor, r.cmp = rg.down, base.down, floor.down, lfsNodeDown
		}
		fmt.Println(r.line())
	}
	return nil
}

// What the lfs bench's lines compare (comparison: rgit= and ref=, and the
// reference's field).
var (
	lfsPresigned = comparison{rgit: "lfs-presigned", ref: "presigned-direct", refField: "direct"}
	lfsNodeUp    = comparison{rgit: "lfs-node-served", ref: "cp-sync", refField: "cp_sync"}
	lfsNodeDown  = comparison{rgit: "lfs-node-served", ref: "cp", refField: "cp"}
)

// lfsResult is one store and direction of the lfs bench: total times of
// all objects on each side.
type lfsResult struct {
	op, store           string
	objects, mb, rounds int
	concurrency         int
	payloadMB           float64
	rgit, ref           time.Duration
	noSync              time.Duration // uploads to the file store: cp without sync
	floor               time.Duration // downloads from the file store: the floor server
	nodeIO              int64         // bytes
	control             time.Duration // per object
	cmp                 comparison
	// perRound: each round's times on both sides, which ran one after
	// the other: a ratio per round pairs them, so a slow moment of a
	// shared machine spoils one round's ratio, not the total's.
	perRound []pairedRound
}

// pairedRound is one round of one operation: rgit's time, the
// reference's and the floor's (file store downloads).
type pairedRound struct{ rgit, ref, floor time.Duration }

// refUp is the reference an upload is compared with: the presigned PUT
// on S3, cp and sync on the file store.
func refUp(store string, base, baseSync lfsSide) time.Duration {
	if store == "s3" {
		return base.up
	}
	return baseSync.up
}

// roundRatios returns the per-round ratios of rgit's time over of's:
// their median, lowest and highest.
func (r lfsResult) roundRatios(of func(pairedRound) time.Duration) (med, lo, hi float64) {
	var rs []float64
	for _, p := range r.perRound {
		if of(p) > 0 {
			rs = append(rs, p.rgit.Seconds()/of(p).Seconds())
		}
	}
	if len(rs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(rs)
	return percentile(rs, 50), rs[0], rs[len(rs)-1]
}

// line formats r as the bench's other lines are: times, ratio rgit over
// the reference (below 1: rgit faster), then throughput and the lfs
// figures, and rgit= ref=:
//
//	lfs op=<op> store=<s> objects=<n> object_mb=<m> rounds=<r> rgit_s=<X> <ref>_s=<Y> ratio=<X/Y> round_ratio_median=… round_ratio_range=<lo>-<hi> [cp_s=<Z>] [floor_s=<F> floor_ratio=<X/F> floor_round_ratio_median=…] rgit_mbps=… <ref>_mbps=… payload_mb=… node_io_mb=… control_ms=… rgit=<how> ref=<what>
func (r lfsResult) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lfs op=%s store=%s objects=%d object_mb=%d rounds=%d concurrency=%d", r.op, r.store, r.objects, r.mb, r.rounds, r.concurrency)
	rg, ref := r.rgit.Seconds(), r.ref.Seconds()
	ratio := 0.0
	if ref > 0 {
		ratio = rg / ref
	}
	f := r.cmp.field()
	med, lo, hi := r.roundRatios(func(p pairedRound) time.Duration { return p.ref })
	fmt.Fprintf(&b, " rgit_s=%.3f %s_s=%.3f ratio=%.2f round_ratio_median=%.2f round_ratio_range=%.2f-%.2f", rg, f, ref, ratio, med, lo, hi)
	if r.noSync > 0 {
		fmt.Fprintf(&b, " cp_s=%.3f", r.noSync.Seconds())
	}
	if r.floor > 0 {
		fmt.Fprintf(&b, " floor_s=%.3f floor_ratio=%.2f", r.floor.Seconds(), rg/r.floor.Seconds())
		fmed, _, _ := r.roundRatios(func(p pairedRound) time.Duration { return p.floor })
		fmt.Fprintf(&b, " floor_round_ratio_median=%.2f", fmed)
	}
	mbps := func(s float64) float64 {
		if s <= 0 {
			return 0
		}
		return r.payloadMB / s
	}
	fmt.Fprintf(&b, " rgit_mbps=%.1f %s_mbps=%.1f payload_mb=%.0f node_io_mb=%.3f control_ms=%.1f rgit=%s ref=%s",
		mbps(rg), f, mbps(ref), r.payloadMB, float64(r.nodeIO)/1e6, float64(r.control.Microseconds())/1e3, r.cmp.rgit, r.cmp.ref)
	return b.String()
}

// timed runs f, adding its time to *d.
func (c *lfsFlags) timed(d *time.Duration, f func() error) error {
	start := time.Now()
	err := f()
	*d += time.Since(start)
	return err
}

// each runs f for every object of a round on -concurrency workers, as
// git-lfs's transfer queue runs lfs.concurrenttransfers at once: a
// worker takes the next object as it finishes one.
func (c *lfsFlags) each(f func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(c.concurrency)
	for i := range c.objects {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// procIO is what process pid read and wrote through system calls so far
// (rchar + wchar of /proc/<pid>/io), sockets included.
func procIO(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "rchar" || k == "wchar" {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n
}

// lfsClient does what git-lfs does for one object over HTTP.
type lfsClient struct {
	base, token string
	// control is the time spent in the requests to rgit itself (batch,
	// verify) rather than in transfers: uploads, downloads.
	// Workers add to it at once.
	control [2]atomic.Int64 // nanoseconds
}

type lfsAction struct {
	Href   string            `json:"href"`
	Header map[string]string `json:"header"`
}

// lfsObject is one object of a round: its bytes, their SHA-256 and the
// file the cp reference copies.
type lfsObject struct {
	data []byte
	sum  [32]byte
	oid  string
	src  string
}

// batch asks for the actions of objs, one map per object.
func (c *lfsClient) batch(ctx context.Context, op string, objs []lfsObject) ([]map[string]lfsAction, error) {
	specs := make([]map[string]any, len(objs))
	for i, o := range objs {
		specs[i] = map[string]any{"oid": o.oid, "size": len(o.data)}
	}
	body, _ := json.Marshal(map[string]any{"operation": op, "transfers": []string{"basic"}, "hash_algo": "sha256", "objects": specs})
	var ans struct {
		Objects []struct {
			Actions map[string]lfsAction `json:"actions"`
			Error   *struct{ Message string }
		} `json:"objects"`
	}
	start := time.Now()
	code, err := c.do(ctx, http.MethodPost, c.base+"/objects/batch", map[string]string{"Content-Type": "application/vnd.git-lfs+json"}, body, &ans)
	if op == "upload" {
		c.control[0].Add(int64(time.Since(start)))
	} else {
		c.control[1].Add(int64(time.Since(start)))
	}
	switch {
	case err != nil:
		return nil, err
	case code != http.StatusOK || len(ans.Objects) != len(objs):
		return nil, fmt.Errorf("batch: status %d", code)
	}
	acts := make([]map[string]lfsAction, len(objs))
	for i, o := range ans.Objects {
		if o.Error != nil {
			return nil, errors.New(o.Error.Message)
		}
		acts[i] = o.Actions
	}
	return acts, nil
}

// upload does an upload batch answer's actions for o: the transfer, then
// the verify.
func (c *lfsClient) upload(ctx context.Context, acts map[string]lfsAction, o lfsObject) error {
	up, verify := acts["upload"], acts["verify"]
	if up.Href == "" || verify.Href == "" {
		return fmt.Errorf("batch gave no upload and verify actions: %v", acts)
	}
	if code, err := c.do(ctx, http.MethodPut, up.Href, up.Header, o.data, nil); err != nil || code != http.StatusOK {
		return fmt.Errorf("upload: status %d, %v", code, err)
	}
	body, _ := json.Marshal(map[string]any{"oid": o.oid, "size": len(o.data)})
	start := time.Now()
	code, err := c.do(ctx, http.MethodPost, verify.Href, verify.Header, body, nil)
	c.control[0].Add(int64(time.Since(start)))
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("verify: status %d, %v", code, err)
	}
	return nil
}

// do sends one request (with the client's token to rgit's own URLs) and
// decodes a JSON answer into out when it is not nil.
func (c *lfsClient) do(ctx context.Context, method, url string, header map[string]string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if strings.HasPrefix(url, c.base) {
		req.SetBasicAuth(benchOwner, c.token)
	}
	resp, err := lfsSend(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// getWhole GETs url and reads the whole body, which must be size bytes.
func getWhole(ctx context.Context, url string, header map[string]string, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := lfsSend(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// 32 KiB a read, as git-lfs reads a download (io.Copy into the
	// object's temporary file through its hashing writer); io.Discard's
	// own ReadFrom would read 8 KiB at a time, a pace no client keeps.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, make([]byte, 32<<10))
	if err == nil && (resp.StatusCode != http.StatusOK || n != size) {
		err = fmt.Errorf("GET: status %d, %d bytes, want %d", resp.StatusCode, n, size)
	}
	return err
}

func presignedPut(ctx context.Context, st *s3store.Store, key string, sum [32]byte, data []byte) error {
	p, err := st.PresignPut(ctx, key, int64(len(data)), sum, time.Minute)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	for k, v := range p.Header {
		req.Header.Set(k, v)
	}
	resp, err := lfsSend(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("presigned PUT: status %d", resp.StatusCode)
	}
	return nil
}

func presignedGet(ctx context.Context, st *s3store.Store, key string, size int64) error {
	p, err := st.PresignGet(ctx, key, time.Minute)
	if err != nil {
		return err
	}
	return getWhole(ctx, p.URL, p.Header, size)
}

// lfsTrace (-trace) prints every request's phases, at= seconds since
// lfsStart (the process's start, as GODEBUG=gctrace=1's @).
var (
	lfsTrace   bool
	lfsStart   = time.Now()
	lfsNodePID string // the rgit node, whose CPU time -trace prints
)

// procCPU is the CPU time process pid used so far (utime + stime of
// /proc/<pid>/stat), in clock ticks (1/100 s on Linux).
func procCPU(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field of the file, utime the 14th, stime the 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// lfsHTTP is the client of both sides: the default one keeps 2 idle
// connections per host, and -concurrency workers would dial again for
// most transfers, where git-lfs keeps one connection per worker.
var lfsHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}()

// lfsSend sends req with lfsHTTP; with -trace it prints, when
// the answer's body is closed, the request's phases in milliseconds from
// its start: connection got (and whether reused), headers and body
// written, first answer byte, body read and closed, and the headers sent.
func lfsSend(req *http.Request) (*http.Response, error) {
	if !lfsTrace {
		return lfsHTTP.Do(req)
	}
	start := time.Now()
	var b strings.Builder
	at := time.Since(lfsStart).Seconds()
	cpu0 := procCPU(lfsNodePID)
	mark := func(what string) { fmt.Fprintf(&b, " %s=%.1f", what, float64(time.Since(start).Microseconds())/1e3) }
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { mark("conn"); fmt.Fprintf(&b, " reused=%t", i.Reused) },
		WroteHeaders:         func() { mark("headers") },
		Got100Continue:       func() { mark("100") },
		WroteRequest:         func(httptrace.WroteRequestInfo) { mark("sent") },
		GotFirstResponseByte: func() { mark("answer") },
	}))
	resp, err := lfsHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	path := req.URL.Path
	if len(path) > 48 {
		path = "…" + path[len(path)-47:]
	}
	names := make([]string, 0, len(req.Header))
	for k := range req.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	query := slices.Sorted(maps.Keys(req.URL.Query()))
	resp.Body = tracedBody{ReadCloser: resp.Body, done: func() {
		mark("done")
		fmt.Fprintf(&b, " node_cpu_ms=%d", (procCPU(lfsNodePID)-cpu0)*10)
		fmt.Fprintf(os.Stderr, "trace at=%.3f %s %s%s status=%d length=%d headers=%s query=%s close=%t\n", at, req.Method, req.URL.Host+path, b.String(), resp.StatusCode, req.ContentLength,
			strings.Join(names, ","), strings.Join(query, ","), resp.Close)
	}}
	return resp, nil
}

type tracedBody struct {
	io.ReadCloser
	done func()
}

func (t tracedBody) Close() error {
	err := t.ReadCloser.Close()
	t.done()
	return err
}

// startFloor starts the lfs bench's floor for downloads from the file
// store, an lfs-floor child serving the files of dir, and returns its
// stop and its URL.
func startFloor(ctx context.Context, dir string) (stop func(), url string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, self, "lfs-floor", dir)
	var log bytes.Buffer
	in, out, err := startPiped(cmd, &log)
	if err != nil {
		return nil, "", err
	}
	stop = func() {
		in.Close()
		cmd.Wait()
	}
	if !out.Scan() {
		stop()
		return nil, "", fmt.Errorf("lfs-floor did not start: %s", lastLines(log.Bytes(), 10))
	}
	return stop, "http://" + out.Text(), nil
}

// runLFSFloor is the lfs-floor child: it serves the files of the
// directory args[0] at /<name> as a minimal net/http server does, io.Copy
// of the open file to the answer (which net/http sends with
// sendfile(2)), on a loopback port it prints, until its input closes.
func runLFSFloor(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: rgit-bench lfs-floor DIR")
	}
	dir := args[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(filepath.Join(dir, filepath.Base(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		io.Copy(w, f)
	})}
	go srv.Serve(ln)
	fmt.Println(ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}
