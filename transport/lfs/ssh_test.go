package lfs

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/gitserve"
	"github.com/rgit/rgit/transport/pktline"
	"github.com/rgit/rgit/transport/sshgit"
)

// sshClient speaks git-lfs-transfer's protocol to a session run in
// process, as git-lfs does over an SSH channel.
type sshClient struct {
	t    *testing.T
	w    *pktline.Writer
	r    *pktline.Reader
	in   *io.PipeWriter
	done chan error
	caps []string
}

func startTransfer(t *testing.T, f *fixture, token, repoPath, op string) *sshClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &sshClient{t: t, w: pktline.NewWriter(inW), r: pktline.NewReader(outR), in: inW, done: make(chan error, 1)}
	name := ""
	go func() {
		err := f.srv.SSH("80").ServeSSH(context.Background(), sshgit.Command{Line: "git-lfs-transfer " + repoPath + " " + op,
			Identity: f.tokens[token], In: inR, Out: outW, Op: &name})
		outW.CloseWithError(io.EOF)
		c.done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	for {
		kind, p, err := c.r.ReadPacket()
		if err != nil {
			err = <-c.done
			if err == nil {
				t.Fatal("session ended before its capabilities")
			}
			c.done <- err
			return c
		}
		if kind == pktline.Flush {
			return c
		}
		c.caps = append(c.caps, strings.TrimSuffix(string(p), "\n"))
	}
}

// send writes a request: the command, its arguments, and after a
// delimiter the lines (text) or data (binary) when either is given.
func (c *sshClient) send(cmd string, args []string, lines []string, data []byte) {
	c.t.Helper()
	c.w.WriteString(cmd + "\n")
	for _, a := range args {
		c.w.WriteString(a + "\n")
	}
	if lines != nil || data != nil {
		c.w.Delim()
		for _, l := range lines {
			c.w.WriteString(l + "\n")
		}
		for len(data) > 0 {
			n := min(len(data), pktline.MaxPayload)
			c.w.Write(data[:n])
			data = data[n:]
		}
	}
	c.w.Flush()
}

// status reads a response: its status, arguments, and what follows a
// delimiter (lines joined, or data).
func (c *sshClient) status() (int, []string, string) {
	c.t.Helper()
	var code int
	var args []string
	var rest strings.Builder
	delim := false
	for i := 0; ; i++ {
		kind, p, err := c.r.ReadPacket()
		if err != nil {
			c.t.Fatalf("read response: %v", err)
		}
		switch {
		case kind == pktline.Flush:
			return code, args, rest.String()
		case kind == pktline.Delim:
			delim = true
		case i == 0:
			code, err = strconv.Atoi(strings.TrimPrefix(strings.TrimSuffix(string(p), "\n"), "status "))
			if err != nil {
				c.t.Fatalf("first line %q is no status", p)
			}
		case delim:
			rest.Write(p)
		default:
			args = append(args, strings.TrimSuffix(string(p), "\n"))
		}
	}
}

func (c *sshClient) want(what string, code int) (int, []string, string) {
	c.t.Helper()
	got, args, rest := c.status()
	if got != code {
		c.t.Fatalf("%s: status %d (%v %q), want %d", what, got, args, rest, code)
	}
	return got, args, rest
}

// TestSSHTransfer drives git-lfs-transfer as git-lfs does: version,
// batch, put-object (refused bytes first: the session stays in step),
// verify-object, get-object, locks, quit; a download session cannot
// change anything; a repository the caller may not see is refused
// before the protocol starts.
func TestSSHTransfer(t *testing.T) {
	f := newFixture(t, nil, Limits{})
	o := newObject(strings.Repeat("over ssh ", 20000))
	line := o.spec.OID + " " + strconv.FormatInt(o.spec.Size, 10)

	up := startTransfer(t, f, "bob", "/alice/priv.git", "upload")
	if strings.Join(up.caps, ",") != "version=1,locking" {
		t.Fatalf("capabilities %v", up.caps)
	}
	up.send("version 1", nil, nil, nil)
	up.want("version", 200)
	up.send("batch", []string{"transfer=ssh", "hash-algo=sha256", "refname=refs/heads/main"}, []string{line}, nil)
	_, args, lines := up.want("batch", 200)
	if !strings.HasPrefix(lines, line+" upload expires-in=") || args[0] != "hash-algo=sha256" {
		t.Fatalf("batch answer %v %q", args, lines)
	}
	up.send("put-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, []byte(strings.ToUpper(string(o.data))))
	up.want("put-object of other bytes", 422)
	up.send("verify-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, nil)
	up.want("verify before a good upload", 404)
	up.send("put-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, o.data)
	up.want("put-object", 200)
	up.send("verify-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, nil)
	up.want("verify-object", 200)
	up.send("batch", []string{"transfer=ssh"}, []string{line}, nil)
	if _, _, lines := up.want("second batch", 200); lines != line+" noop\n" {
		t.Fatalf("second batch: %q, want noop", lines)
	}
	up.send("lock", []string{"path=level.bin"}, nil, nil)
	_, args, _ = up.want("lock", 201)
	if len(args) != 4 || !strings.HasPrefix(args[0], "id=") || args[1] != "path=level.bin" || args[3] != "ownername=bob" {
		t.Fatalf("lock answer %v", args)
	}
	lockID := strings.TrimPrefix(args[0], "id=")
	up.send("lock", []string{"path=level.bin"}, nil, nil)
	up.want("second lock", 409)
	up.send("list-locks", nil, nil, nil)
	if _, _, lines := up.want("list-locks", 200); !strings.Contains(lines, "owner "+lockID+" ours\n") {
		t.Fatalf("bob's list: %q", lines)
	}

	down := startTransfer(t, f, "rea", "/alice/priv.git", "download")
	down.send("batch", []string{"transfer=ssh"}, []string{line, strings.Repeat("0", 64) + " 3"}, nil)
	if _, _, lines := down.want("download batch", 200); !strings.Contains(lines, line+" download expires-in=") || !strings.Contains(lines, strings.Repeat("0", 64)+" 3 noop") {
		t.Fatalf("download batch: %q", lines)
	}
	down.send("get-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, nil)
	_, args, data := down.want("get-object", 200)
	if len(args) != 1 || args[0] != "size="+strconv.FormatInt(o.spec.Size, 10) || data != string(o.data) {
		t.Fatalf("get-object: %v, %d bytes", args, len(data))
	}
	down.send("put-object "+o.spec.OID, []string{"size=" + strconv.FormatInt(o.spec.Size, 10)}, nil, o.data)
	down.want("put-object in a download session", 403)
	down.send("list-lock", []string{"path=level.bin"}, nil, nil)
	if _, _, lines := down.want("list-lock", 200); !strings.Contains(lines, "ownername "+lockID+" bob\n") || strings.Contains(lines, "owner "+lockID+" ") {
		t.Fatalf("reader's list: %q", lines)
	}
	down.send("unlock "+lockID, nil, nil, nil)
	down.want("unlock in a download session", 403)
	down.send("quit", nil, nil, nil)
	down.want("quit", 200)
	if err := <-down.done; err != nil {
		t.Fatalf("download session: %v", err)
	}

	up.send("unlock "+lockID, nil, nil, nil)
	up.want("unlock", 200)
	up.send("frobnicate", nil, nil, nil)
	up.want("unknown command", 400)
	up.send("quit", nil, nil, nil)
	up.want("quit", 200)
	if err := <-up.done; err != nil {
		t.Fatalf("upload session: %v", err)
	}

	for _, c := range []struct {
		token, repo, op string
		decision        auth.Decision
	}{
		{"carol", "/alice/priv.git", "download", auth.NotFound},
		{"rea", "/alice/priv.git", "upload", auth.Forbidden},
		{"", "/alice/pub", "upload", auth.Unauthorized},
	} {
		s := startTransfer(t, f, c.token, c.repo, c.op)
		var denied *gitserve.DeniedError
		if err := <-s.done; !errors.As(err, &denied) || denied.Decision != c.decision {
			t.Errorf("%q %s %s: %v, want %s", c.token, c.op, c.repo, err, c.decision)
		}
	}
}
