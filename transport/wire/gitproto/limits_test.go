package gitproto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// repeatReader yields head, then line n times, then tail, without holding
// the whole request, and counts what the server read.
type repeatReader struct {
	head, line, tail string
	n                int
	cur              string
	read             int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	for r.cur == "" {
		switch {
		case r.head != "":
			r.cur, r.head = r.head, ""
		case r.n > 0:
			r.cur, r.n = r.line, r.n-1
		case r.tail != "":
			r.cur, r.tail = r.tail, ""
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	r.read += int64(n)
	return n, nil
}

// size is the whole request's length.
func (r *repeatReader) size() int64 {
	return int64(len(r.head) + r.n*len(r.line) + len(r.tail))
}

// memoBackend answers HasCommit from memory after the first git call per
// id and counts the calls, so a request of a million haves costs what the
// protocol layer makes of it, not a million git processes.
type memoBackend struct {
	*gitRepo
	mu       sync.Mutex
	has      map[object.ID]bool
	hasCalls atomic.Int64
}

func (b *memoBackend) HasCommit(ctx context.Context, id object.ID) bool {
	b.hasCalls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.has[id]
	if !ok {
		v = b.gitRepo.HasCommit(ctx, id)
		b.has[id] = v
	}
	return v
}

// response is a served response read as pkt-lines: its size and its data
// lines outside side-band, counted.
type response struct {
	bytes int64
	lines map[string]int
}

// serveCounted runs UploadPack on in and reads the response as it is
// written, keeping only the line counts.
func serveCounted(b Backend, in io.Reader, opt Options) (response, error) {
	pr, pw := io.Pipe()
	done := make(chan response)
	go func() {
		res := response{lines: map[string]int{}}
		cr := &countingReader{r: pr}
		r := pktline.NewReader(cr)
		for {
			k, p, err := r.ReadPacket()
			if err != nil {
				break
			}
			if k == pktline.Data && len(p) > 0 && p[0] > 2 { // not side-band
				res.lines[strings.TrimSuffix(string(p), "\n")]++
			}
		}
		_, _ = io.Copy(io.Discard, cr)
		res.bytes = cr.n
		done <- res
	}()
	err := UploadPack(context.Background(), b, in, pw, opt)
	pw.Close()
	return <-done, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestRepeatedHaves: a request of a million identical have lines is
// answered with one ACK, asks the backend once, and costs the server a
// bounded amount of memory (TotalAlloc bounds the peak heap growth).
// Before, v2 buffered every line and ACKed each (51 MB reply, ~180 MB
// heap), and v0 multi_ack_detailed ACKed each (58 MB reply).
func TestRepeatedHaves(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	src := newFixture(t)
	main, common := rev(t, src, "main"), rev(t, src, "main~2")
	const n = 1_000_000
	const maxGrowth = 16 << 20
	cases := []struct {
		name     string
		opt      Options
		head     string
		tail     string
		ack      string // the one acknowledgment expected
		response []string
	}{
		{
			name: "v2",
			opt:  Options{Protocol: 2, StatelessRPC: true},
			head: pkt("command=fetch\n", "0001", "want "+main+"\n", "ofs-delta\n"),
			tail: pkt("0000"),
			ack:  "ACK " + common, response: []string{"acknowledgments", "ready", "packfile"},
		},
		{
			name: "v0 multi_ack_detailed",
			opt:  Options{StatelessRPC: true},
			head: pkt("want "+main+" multi_ack_detailed side-band-64k ofs-delta\n", "0000"),
			tail: pkt("0000"),
			ack:  "ACK " + common + " common", response: []string{"ACK " + common + " ready", "NAK"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &memoBackend{gitRepo: &gitRepo{dir: src}, has: map[object.ID]bool{}}
			in := &repeatReader{head: tc.head, line: pkt("have " + common + "\n"), n: n, tail: tc.tail}
			total := in.size()
			// The byte cap is raised above this request's 53 MB: the test
			// is about repetition, TestLimits about the cap.
			tc.opt.Limits = Limits{MaxArgBytes: 64 << 20, MaxHaves: 10}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, err := serveCounted(b, in, tc.opt)
			runtime.GC()
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if in.read != total {
				t.Errorf("server read %d of %d request bytes", in.read, total)
			}
			if got := res.lines[tc.ack]; got != 1 {
				t.Errorf("%d × %q, want 1", got, tc.ack)
			}
			for _, l := range tc.response {
				if res.lines[l] != 1 {
					t.Errorf("response lacks %q: %v", l, res.lines)
				}
			}
			if got := b.hasCalls.Load(); got != 1 {
				t.Errorf("HasCommit called %d times, want 1", got)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			inuse := int64(after.HeapInuse) - int64(before.HeapInuse)
			t.Logf("%d-byte request: %d-byte response, %d bytes allocated, heap in use %+d", total, res.bytes, alloc, inuse)
			if alloc > maxGrowth || inuse > maxGrowth {
				t.Errorf("heap grew by up to %d bytes (in use %+d), limit %d", alloc, inuse, maxGrowth)
			}
		})
	}
}

// TestLimits: a request over a limit gets the ERR line the client prints,
// naming the limit and its setting, and the server reads no further than
// the line that crossed it.
func TestLimits(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	var c [6]string
	for i := range c {
		c[i] = rev(t, src, "main~"+strconv.Itoa(i))
	}
	v2 := func(l Limits) Options { return Options{Protocol: 2, StatelessRPC: true, Limits: l} }
	v0 := func(l Limits) Options { return Options{StatelessRPC: true, Limits: l} }
	fetch := pkt("command=fetch\n", "0001")
	v0want := pkt("want "+c[0]+" multi_ack_detailed side-band-64k\n", "0000")
	cases := []struct {
		name string
		opt  Options
		in   string
		want string // the response ends in this ERR line
	}{
		{"v2 wants", v2(Limits{MaxWants: 2}), fetch + pkt("want "+c[0]+"\n", "want "+c[0]+"\n", "want "+c[1]+"\n", "want "+c[2]+"\n"),
			"ERR too many want lines (limit 2, set RGIT_MAX_WANTS)\n"},
		{"v2 want-refs", v2(Limits{MaxWants: 2}), fetch + pkt("want "+c[0]+"\n", "want-ref refs/heads/main\n", "want-ref refs/heads/feature\n"),
			"ERR too many want lines (limit 2, set RGIT_MAX_WANTS)\n"},
		{"v2 haves", v2(Limits{MaxHaves: 2}), fetch + pkt("want "+c[0]+"\n", "have "+c[1]+"\n", "have "+c[1]+"\n", "have "+c[2]+"\n", "have "+c[3]+"\n"),
			"ERR too many have lines (limit 2, set RGIT_MAX_HAVES)\n"},
		{"v2 argument bytes", v2(Limits{MaxArgBytes: 100}), fetch + pkt("want "+c[0]+"\n", "have "+c[1]+"\n"),
			"ERR request too large (limit 100 bytes, set RGIT_MAX_ARG_BYTES)\n"},
		{"v2 ls-refs argument bytes", v2(Limits{MaxArgBytes: 20}), pkt("command=ls-refs\n", "0001", "ref-prefix refs/heads/\n"),
			"ERR request too large (limit 20 bytes, set RGIT_MAX_ARG_BYTES)\n"},
		{"v0 wants", v0(Limits{MaxWants: 2}), pkt("want "+c[0]+" side-band-64k\n", "want "+c[1]+"\n", "want "+c[1]+"\n", "want "+c[2]+"\n"),
			"ERR upload-pack: too many want lines (limit 2, set RGIT_MAX_WANTS)\n"},
		{"v0 haves", v0(Limits{MaxHaves: 2}), v0want + pkt("have "+c[1]+"\n", "have "+c[1]+"\n", "have "+c[2]+"\n", "have "+c[3]+"\n"),
			"ERR upload-pack: too many have lines (limit 2, set RGIT_MAX_HAVES)\n"},
		{"v0 full-duplex haves across rounds", Options{Limits: Limits{MaxHaves: 2}}, v0want + pkt("have "+c[1]+"\n", "0000", "have "+c[2]+"\n", "0000", "have "+c[3]+"\n"),
			"ERR upload-pack: too many have lines (limit 2, set RGIT_MAX_HAVES)\n"},
		{"v0 argument bytes", v0(Limits{MaxArgBytes: 150}), v0want + pkt("have "+c[1]+"\n", "have "+c[2]+"\n"),
			"ERR upload-pack: request too large (limit 150 bytes, set RGIT_MAX_ARG_BYTES)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// 1 MB of further haves the server must not read.
			in := &repeatReader{head: tc.in, line: pkt("have " + c[5] + "\n"), n: 20000}
			var out bytes.Buffer
			err := UploadPack(context.Background(), &gitRepo{dir: src}, in, &out, tc.opt)
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v: want a *LimitError wrapping ErrProtocol", err)
			}
			if want := pkt(tc.want); !strings.HasSuffix(out.String(), want) {
				t.Errorf("response %q does not end in %q", out.String(), want)
			}
			// The connection's read buffer (64 KiB) is all it may read ahead.
			if in.read > int64(len(tc.in))+64<<10 {
				t.Errorf("server read %d bytes of a %d-byte request after the limit", in.read, in.size())
			}
		})
	}
}

// TestFetchManyHaves: a real git fetch whose client has hundreds of
// commits the server lacks sends them as haves in growing rounds (16, 32,
// 64, ...) before it finds common history; that still works, in every
// protocol version. (The test backend runs git per have, so a few hundred
// keep it quick.)
func TestFetchManyHaves(t *testing.T) {
	t.Parallel()
	const local = 400
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			src := newFixture(t)
			dst, _ := clone(t, proto, src, nil)
			addCommits(t, dst, "refs/heads/local", "main", "local", local)
			newMain := addCommit(t, src, "refs/heads/main", "", "n1.txt")
			out, err := tryGit(t, "", []string{"GIT_TRACE_PACKET=1"}, "--git-dir", dst,
				"-c", "protocol.version="+strconv.Itoa(proto), "fetch", "--upload-pack", helperCmd(t, "upload"),
				"origin", "+refs/heads/main:refs/heads/main")
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out, "> have "); n < local {
				t.Errorf("client sent %d have lines, want at least %d", n, local)
			}
			if got := rev(t, dst, "main"); got != newMain {
				t.Errorf("main = %s, want %s", got, newMain)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--no-dangling")
		})
	}
}
