package main

// rgit-bench lfs: Git LFS transfers through a node against the store's
// own speed, one line per store and direction:
//
//	lfs op=upload store=s3 objects=5 object_mb=20 rounds=3 rgit_s=… direct_s=… ratio=… rgit_mbps=… direct_mbps=… payload_mb=300 node_io_mb=… control_ms=… rgit=lfs-presigned ref=presigned-direct
//	lfs op=upload store=file … rgit_s=… cp_sync_s=… ratio=… cp_s=… rgit_mbps=… cp_sync_mbps=… … rgit=lfs-node-served ref=cp-sync
//	lfs op=download store=file … rgit_s=… cp_s=… ratio=… … rgit=lfs-node-served ref=cp
//
// ratio is time, rgit over the reference, as on every bench line (a
// throughput of at least 0.9 times the store's is a ratio of at most
// 1.11).
//
// The rgit side is what git-lfs does, from a Go client so that only the
// server is measured: one batch request per operation for a round's
// objects (git-lfs asks for up to 100 at a time), the transfer each
// action names, and for uploads the verify. Object ids are computed
// before either side's clock starts (git-lfs hashes a file when it is
// added, not when it is pushed), and the round's setup is synced to disk
// before them too (its write-back would land on the first transfers). On S3 (versitygw) the transfer is a
// presigned URL of the store, and the baseline is a presigned PUT or GET
// of the same bytes that the bench signs itself; on the file store the
// node serves the transfer (hashing the upload and writing it durably:
// temp file, fsync, link), and the reference is `cp` of the same bytes
// on the same file system followed by `sync` of the copy for uploads
// (cp_s, without the sync, is printed beside it), `cp` to /dev/null for
// downloads. The two
// sides alternate object by object (and which goes first, and which
// starts a round), so both see the same load; on S3 the same Go client moves the bytes on both
// sides. control_ms is the mean time per object of the requests
// to rgit that move no content (batch, and verify for uploads): what
// LFS adds to a transfer that the store does at its own speed.
// node_io_mb is what the rgit process read and wrote through system
// calls (sockets and files, /proc/<pid>/io rchar+wchar) during the rgit
// side's transfers: on S3 a few requests' worth, on the file store a
// multiple of the payload.

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
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/fixture"
)

type lfsFlags struct {
	dir, stores, rgitBin string
	objects, mb, rounds  int
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
	fs.BoolVar(&c.trace, "trace", false, "print every request's phases to stderr (connection reused, body written, first answer byte, done)")
	fs.Parse(args)
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

	var rg, base, baseSync lfsSide
	size := int64(c.mb) * 1e6
	// both runs the rgit side and the baseline of one object, the rgit
	// side first when n (the round plus the object's index) is even and
	// second when odd, so neither side always meets the store's
	// write-back of the other, and rounds start with each side in turn
	// whatever the number of objects.
	both := func(n int, rgit, baseline func() error) error {
		if n%2 == 1 {
			if err := baseline(); err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
		}
		if err := rgit(); err != nil {
			return fmt.Errorf("rgit: %w", err)
		}
		if n%2 == 0 {
			if err := baseline(); err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
		}
		return nil
	}
	// rgitIO runs f, a request to rgit or a transfer it answered, adding
	// its time to *d and the node's I/O to *io.
	rgitIO := func(d *time.Duration, io *int64, f func() error) error {
		io0 := procIO(pid)
		t, err := timed(f)
		*d += t
		*io += procIO(pid) - io0
		return err
	}
	// warm moves one object to and from the store outside both clocks
	// (data: a PUT of it; nil: a GET of the last one): the first transfer
	// after the round's setup was 2 to 4 times slower than the rest
	// (-trace), whichever side made it, and the rgit side made it in two
	// rounds of three. Nothing to warm on the file store (cp).
	warm := func(data []byte) error {
		switch {
		case direct == nil:
			return nil
		case data != nil:
			return presignedPut(ctx, direct, "direct/warm", sha256.Sum256(data), data)
		}
		return presignedGet(ctx, direct, "direct/warm", size)
	}
	for round := range c.rounds {
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
		// The round's setup (and the last round's transfers) leave dirty
		// pages that the kernel writes back while the clocks run, slowing
		// whichever transfer meets it: the first of a round, always the
		// same side before. Write them now, outside both clocks.
		syscall.Sync()
		runtime.GC()
		if err := warm(objs[0].data); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		// One batch per operation for the round's objects, as git-lfs
		// asks (up to 100 objects at a time).
		var acts []map[string]lfsAction
		if err := rgitIO(&rg.up, &rg.io[0], func() (err error) { acts, err = cl.batch(ctx, "upload", objs); return err }); err != nil {
			return fmt.Errorf("upload batch: %w", err)
		}
		for i, o := range objs {
			key := fmt.Sprintf("direct/%d-%d", round, i)
			rgit := func() error { return rgitIO(&rg.up, &rg.io[0], func() error { return cl.upload(ctx, acts[i], o) }) }
			baseline := func() error {
				if store == "s3" {
					d, err := timed(func() error { return presignedPut(ctx, direct, key, o.sum, o.data) })
					base.up += d
					return err
				}
				d, err := timed(func() error { return exec.CommandContext(ctx, "cp", o.src, filepath.Join(work, "cp.bin")).Run() })
				base.up += d
				if err != nil {
					return err
				}
				d, err = timed(func() error {
					return exec.CommandContext(ctx, "sh", "-c", `cp "$1" "$2" && sync "$2"`, "sh", o.src, filepath.Join(work, "cp-sync.bin")).Run()
				})
				baseSync.up += d
				return err
			}
			if err := both(round+i, rgit, baseline); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
		}
		syscall.Sync() // the uploads' pages, as at the round's start
		if err := warm(nil); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if err := rgitIO(&rg.down, &rg.io[1], func() (err error) { acts, err = cl.batch(ctx, "download", objs); return err }); err != nil {
			return fmt.Errorf("download batch: %w", err)
		}
		for i, o := range objs {
			rgit := func() error {
				return rgitIO(&rg.down, &rg.io[1], func() error { return getWhole(ctx, acts[i]["download"].Href, acts[i]["download"].Header, size) })
			}
			baseline := func() error {
				var d time.Duration
				var err error
				if store == "s3" {
					d, err = timed(func() error { return presignedGet(ctx, direct, fmt.Sprintf("direct/%d-%d", round, i), size) })
				} else {
					stored := filepath.Join(work, "store", "objects", benchOwner, "lfs", "lfs", o.oid)
					d, err = timed(func() error { return exec.CommandContext(ctx, "cp", stored, "/dev/null").Run() })
				}
				base.down += d
				return err
			}
			if err := both(round+i, rgit, baseline); err != nil {
				return fmt.Errorf("download: %w", err)
			}
		}
	}
	n := c.rounds * c.objects
	for k, op := range []string{"upload", "download"} {
		r := lfsResult{op: op, store: store, objects: c.objects, mb: c.mb, rounds: c.rounds,
			payloadMB: float64(int64(n)*size) / 1e6, nodeIO: rg.io[k], control: cl.control[k] / time.Duration(n)}
		switch {
		case op == "upload" && store == "s3":
			r.rgit, r.ref, r.cmp = rg.up, base.up, lfsPresigned
		case op == "upload":
			// The node writes durably: cp and sync is the like.
			r.rgit, r.ref, r.noSync, r.cmp = rg.up, baseSync.up, base.up, lfsNodeUp
		case store == "s3":
			r.rgit, r.ref, r.cmp = rg.down, base.down, lfsPresigned
		default:
			r.rgit, r.ref, r.cmp = rg.down, base.down, lfsNodeDown
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
	payloadMB           float64
	rgit, ref           time.Duration
	noSync              time.Duration // uploads to the file store: cp without sync
	nodeIO              int64         // bytes
	control             time.Duration // per object
	cmp                 comparison
}

// line formats r as the bench's other lines are: times, ratio rgit over
// the reference (below 1: rgit faster), then throughput and the lfs
// figures, and rgit= ref=:
//
//	lfs op=<op> store=<s> objects=<n> object_mb=<m> rounds=<r> rgit_s=<X> <ref>_s=<Y> ratio=<X/Y> [cp_s=<Z>] rgit_mbps=… <ref>_mbps=… payload_mb=… node_io_mb=… control_ms=… rgit=<how> ref=<what>
func (r lfsResult) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lfs op=%s store=%s objects=%d object_mb=%d rounds=%d", r.op, r.store, r.objects, r.mb, r.rounds)
	rg, ref := r.rgit.Seconds(), r.ref.Seconds()
	ratio := 0.0
	if ref > 0 {
		ratio = rg / ref
	}
	f := r.cmp.field()
	fmt.Fprintf(&b, " rgit_s=%.3f %s_s=%.3f ratio=%.2f", rg, f, ref, ratio)
	if r.noSync > 0 {
		fmt.Fprintf(&b, " cp_s=%.3f", r.noSync.Seconds())
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

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
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
	control [2]time.Duration
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
		c.control[0] += time.Since(start)
	} else {
		c.control[1] += time.Since(start)
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
	c.control[0] += time.Since(start)
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
	n, err := io.Copy(io.Discard, resp.Body)
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

// lfsSend sends req with the default client; with -trace it prints, when
// the answer's body is closed, the request's phases in milliseconds from
// its start: connection got (and whether reused), headers and body
// written, first answer byte, body read and closed, and the headers sent.
func lfsSend(req *http.Request) (*http.Response, error) {
	if !lfsTrace {
		return http.DefaultClient.Do(req)
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
	resp, err := http.DefaultClient.Do(req)
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
