package node_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// pushRequest is a receive-pack request body: the commands ("old new ref"),
// the first with caps, a flush, then pack (nil: the empty pack).
func pushRequest(caps string, cmds []string, pack []byte) []byte {
	var b bytes.Buffer
	for i, c := range cmds {
		line := c + "\n"
		if i == 0 {
			line = c + "\x00" + caps + "\n"
		}
		fmt.Fprintf(&b, "%04x%s", len(line)+4, line)
	}
	b.WriteString("0000")
	if pack == nil {
		// "PACK", version 2, zero objects, SHA-1 trailer.
		hdr := []byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0}
		sum := sha1.Sum(hdr)
		pack = append(hdr, sum[:]...)
	}
	b.Write(pack)
	return b.Bytes()
}

// postReceivePack sends body to repo's receive-pack over smart HTTP as
// token's owner, gzip-encoded if gz, and returns the status and answer.
func postReceivePack(t *testing.T, addr, token, repo string, body []byte, gz bool) (int, string) {
	t.Helper()
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/"+repo+".git/git-receive-pack", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("x", token)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPushErrorsSayWhy: a push whose gzip body inflates past RGIT_MAX_BODY
// is refused naming the limit (not as a corrupt pack), and a push updating
// one ref twice is refused saying so (not as a funny refname). git never
// gzips a push body nor sends a ref twice, so the requests are made by
// hand.
func TestPushErrorsSayWhy(t *testing.T) {
	const limit = 1 << 20
	srv := gitenv.StartServer(t, gitenv.FileStore(t), fmt.Sprintf("RGIT_MAX_BODY=%d", limit))
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/limits")
	work := env.Scratch(t)
	// Stored uncompressed in the pack, the blob makes the pack larger than
	// the limit while its gzip encoding stays far below it.
	head := env.Commit(t, work, "big", map[string]string{"big.txt": strings.Repeat("all work and no play\n", 2*limit/21)})
	r := env.Command(work, nil, "sh", "-c", "git rev-list --objects main | git -c pack.compression=0 pack-objects --stdout")
	if !r.OK() {
		t.Fatal(r)
	}
	zero := strings.Repeat("0", 40)
	caps := "report-status side-band-64k"
	body := pushRequest(caps, []string{zero + " " + head + " refs/heads/main"}, []byte(r.Stdout))
	if len(body) <= limit {
		t.Fatalf("push body %d bytes is not over the limit", len(body))
	}

	status, answer := postReceivePack(t, srv.HTTPAddr, tok, "alice/limits", body, true)
	if !strings.Contains(answer, fmt.Sprintf("limit of %d bytes (RGIT_MAX_BODY)", limit)) || strings.Contains(answer, "truncated") {
		t.Errorf("gzip push over the limit: status %d, answer %q; want the limit named", status, answer)
	}
	if status == http.StatusOK && strings.Contains(answer, "ok refs/heads/main") {
		t.Errorf("push over the limit updated main: %q", answer)
	}

	// git's own push (compressed objects) fits; then two updates of one
	// ref are both refused.
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/limits"), "main")
	dup := pushRequest("report-status", []string{zero + " " + head + " refs/heads/dup", zero + " " + head + " refs/heads/dup"}, nil)
	status, answer = postReceivePack(t, srv.HTTPAddr, tok, "alice/limits", dup, false)
	want := "ng refs/heads/dup ref updated more than once in this push\n"
	if status != http.StatusOK || strings.Count(answer, want) != 2 || strings.Contains(answer, "funny refname") {
		t.Errorf("duplicate ref update: status %d, answer %q; want both refused as duplicates", status, answer)
	}
	if refs := env.Run(t, "", "ls-remote", srv.HTTPURL(tok, "alice/limits")); strings.Contains(refs, "refs/heads/dup") {
		t.Errorf("duplicate update created the ref:\n%s", refs)
	}
}

// TestSingleNodeAdminOnLoopback: a single node whose RGIT_PEER_ADDR is
// left at its default (no host) serves the peer stream port, which carries
// rgit-admin, on loopback only.
func TestSingleNodeAdminOnLoopback(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{
		"RGIT_STORE_URL": gitenv.FileStore(t).URL,
		"RGIT_CACHE_DIR": dir,
		"RGIT_HOST_KEY":  filepath.Join(dir, "host_key"),
		"RGIT_HTTP_ADDR": "127.0.0.1:0",
		"RGIT_SSH_ADDR":  "127.0.0.1:0",
	}
	cfg, err := config.Parse(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	// The default's form (":8081", no host) on a free port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg.PeerAddr = ":" + strconv.Itoa(port-1)
	srv, err := node.Start(context.Background(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if host, _, _ := net.SplitHostPort(srv.AdminAddr); host != "127.0.0.1" {
		t.Fatalf("single-node admin address %q, want 127.0.0.1", srv.AdminAddr)
	}
}

// TestHTTPTimeouts: on every HTTP listener of a node, an idle keep-alive
// connection is closed after RGIT_HTTP_IDLE_SECS and a request body that
// stops moving after RGIT_HTTP_BODY_STALL_SECS.
func TestHTTPTimeouts(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_HTTP_IDLE_SECS=1", "RGIT_HTTP_BODY_STALL_SECS=1")
	// closed waits for the server to close c (reading whatever it sends)
	// and fails unless that takes at least min.
	closed := func(t *testing.T, c net.Conn, start time.Time, min time.Duration) string {
		t.Helper()
		// A bound for a broken server, not the expectation.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("connection not closed: %v (got %q)", err, got)
		}
		if d := time.Since(start); d < min {
			t.Fatalf("closed after %s, before %s", d, min)
		}
		return string(got)
	}
	srv.CreateRepo(t, "alice/stall")
	tok := srv.AddToken(t, "alice")
	// Requests whose handlers read the body: a fetch, an admin command.
	listeners := map[string]struct{ addr, post string }{
		"public": {srv.HTTPAddr, "POST /alice/stall.git/git-upload-pack HTTP/1.1\r\nAuthorization: Basic " +
			base64.StdEncoding.EncodeToString([]byte("x:"+tok)) + "\r\nContent-Type: application/x-git-upload-pack-request\r\n"},
		"admin": {srv.AdminAddr, "POST " + peer.PathMsg + " HTTP/1.1\r\nAuthorization: Bearer " + srv.PeerSecret + "\r\n"},
	}
	for name, l := range listeners {
		addr := l.addr
		t.Run(name+"/idle", func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			closed(t, c, time.Now(), 900*time.Millisecond)
		})
		t.Run(name+"/stalled-body", func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			io.WriteString(c, l.post+"Host: x\r\nContent-Length: 1000\r\n\r\n0123456789")
			got := closed(t, c, start, 900*time.Millisecond)
			if name == "public" && !strings.HasPrefix(got, "HTTP/1.1 408") {
				t.Errorf("answer %q, want 408", got)
			}
		})
	}
}
