package node_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/gitrun"
)

// slowSSH is an anonymous SSH client (a key nobody registered) that reads
// a v0 upload-pack advertisement, starts its first want line ("0032want
// ") and then sends a byte of it a second: the attack of a client that
// holds what the server gives it while it waits.
type slowSSH struct {
	client *gossh.Client
	sess   *gossh.Session
	ended  chan error
	stderr strings.Builder
	stdout *bufio.Reader
}

func startSlowSSH(t *testing.T, addr, repo string, every time.Duration, oid string) *slowSSH {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "git", Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSSH{client: c, ended: make(chan error, 1)}
	t.Cleanup(func() { c.Close() })
	if s.sess, err = c.NewSession(); err != nil {
		t.Fatal(err)
	}
	stdin, err := s.sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewReader(out)
	s.sess.Stderr = &s.stderr
	if err := s.sess.Start("git-upload-pack '" + repo + ".git'"); err != nil {
		t.Fatal(err)
	}
	readUntilFlush(t, s.stdout)
	rest := oid + "\n"
	if _, err := io.WriteString(stdin, "0032want "); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < len(rest); i++ {
			time.Sleep(every)
			if _, err := stdin.Write([]byte{rest[i]}); err != nil {
				return
			}
		}
	}()
	go func() { s.ended <- s.sess.Wait() }()
	return s
}

// readUntilFlush reads pkt-lines up to a flush packet.
func readUntilFlush(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("advertisement: %v", err)
		}
		n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
		if err != nil {
			t.Fatalf("advertisement: bad length %q", hdr)
		}
		if n == 0 {
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)-4); err != nil {
			t.Fatalf("advertisement: %v", err)
		}
	}
}

// startSlowHTTP is an anonymous protocol v2 fetch whose chunked body
// starts its first want line and then sends a byte of it a second.
func startSlowHTTP(t *testing.T, addr, repo string, every time.Duration, oid string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	fmt.Fprintf(c, "POST /%s.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\n"+
		"Git-Protocol: version=2\r\nTransfer-Encoding: chunked\r\n\r\n%s", repo, chunk("0012command=fetch\n00010032want "))
	rest := oid + "\n"
	go func() {
		for i := 0; i < len(rest); i++ {
			time.Sleep(every)
			if _, err := io.WriteString(c, chunk(rest[i:i+1])); err != nil {
				return
			}
		}
	}()
	return c
}

// gitWithin runs git under env, killed after d: a fetch that waits for a
// slot a slow client holds would otherwise hang the test.
func gitWithin(env *gitenv.Env, d time.Duration, dir string, extra []string, args ...string) (gitenv.Result, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = env.Environ(extra...)
	start := time.Now()
	r := gitrun.Exec(cmd)
	return r, time.Since(start)
}

// TestSlowClientsHoldNoSlot: with RGIT_MAX_NEGOTIATIONS=2, two anonymous
// SSH sessions and two anonymous HTTP fetches that started a want line and
// send one byte of it a second leave every other fetch alone: a real git
// fetch over HTTP and over SSH completes meanwhile. (Each slow client
// held a negotiation slot from before it sent its arguments, so the
// fetch waited for them: git timed out.)
func TestSlowClientsHoldNoSlot(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_MAX_NEGOTIATIONS=2", "RGIT_NEGOTIATION_WAIT_SECS=300")
	env := gitenv.New(t)
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/pub")
	srv.Admin(t, "set-visibility", "alice/pub", "public")
	work := filepath.Join(t.TempDir(), "work")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/pub"), work)
	first := env.Commit(t, work, "first", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")

	var ssh []*slowSSH
	var slowHTTP []net.Conn
	for range 2 {
		ssh = append(ssh, startSlowSSH(t, srv.SSHAddr, "alice/pub", time.Second, first))
		slowHTTP = append(slowHTTP, startSlowHTTP(t, srv.HTTPAddr, "alice/pub", time.Second, first))
	}
	second := env.Commit(t, work, "second", map[string]string{"b.txt": "b\n"})
	env.Run(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")

	for _, tr := range []struct {
		name, url string
		env       []string
	}{
		{"http", srv.HTTPURL(tok, "alice/pub"), nil},
		{"ssh", srv.SSHURL("alice/pub"), gitenv.SSHEnv(key)},
	} {
		dst := filepath.Join(t.TempDir(), "dst")
		env.Run(t, "", "init", "-q", "--bare", dst)
		r, took := gitWithin(env, time.Minute, dst, tr.env, "fetch", "-q", tr.url, "+refs/heads/main:refs/heads/main")
		if !r.OK() {
			t.Fatalf("%s fetch while slow clients hold connections: %s", tr.name, r)
		}
		if got := env.Run(t, dst, "rev-parse", "main"); got != second {
			t.Fatalf("%s fetch got main %s, want %s", tr.name, got, second)
		}
		t.Logf("%s fetch with 4 slow clients connected: %s", tr.name, took.Round(time.Millisecond))
	}
	for i, s := range ssh {
		select {
		case err := <-s.ended:
			t.Errorf("slow SSH client %d was cut off during the test (%v): it should still be connected", i, err)
		default:
		}
	}
	for i, c := range slowHTTP {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var b [1]byte
		if n, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("slow HTTP client %d was answered during the test (%d bytes, %v): it should still be waited for", i, n, err)
		}
	}
}

// TestRequestDeadlineOverSSH: a client that sends its request a byte at a
// time is cut off when the whole request is late (RGIT_REQUEST_SECS), not
// when it stops sending (it never does), with the message git would
// print.
func TestRequestDeadlineOverSSH(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_REQUEST_SECS=2")
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/pub")
	srv.Admin(t, "set-visibility", "alice/pub", "public")
	work := filepath.Join(t.TempDir(), "work")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/pub"), work)
	first := env.Commit(t, work, "first", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", "origin", "HEAD:refs/heads/main")

	start := time.Now()
	s := startSlowSSH(t, srv.SSHAddr, "alice/pub", 200*time.Millisecond, first) // 41 bytes: 8 s
	select {
	case <-s.ended:
	case <-time.After(30 * time.Second): // a bound for a broken server
		t.Fatal("the trickling client is still connected after 30 s")
	}
	took := time.Since(start)
	const want = "request not complete in time (limit 2 seconds, set RGIT_REQUEST_SECS)"
	if !strings.Contains(s.stderr.String(), "ERROR: "+want) {
		t.Errorf("stderr %q, want %q", s.stderr.String(), want)
	}
	rest, _ := io.ReadAll(s.stdout)
	if !strings.Contains(string(rest), "ERR "+want) {
		t.Errorf("stdout after the advertisement %q, want the ERR line", rest)
	}
	if took < 2*time.Second || took > 7*time.Second {
		t.Errorf("cut off after %s, want about the 2 s request deadline (the whole request needs 8 s)", took)
	}
}
