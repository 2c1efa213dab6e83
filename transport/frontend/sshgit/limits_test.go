package sshgit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/testkit/need"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// TestGreeting: a shell request answers who the key signed in as, with
// exit status 1, as the OpenSSH client prints it (with and without the
// pty it asks for by default), and for an unregistered key says so.
func TestGreeting(t *testing.T) {
	f := newFixture(t, nil)
	const alice = "Hi alice! You've successfully authenticated, but rgit does not provide shell access.\n"
	if stderr, status := f.run(t, f.alice, "", false); status != 1 || stderr != alice {
		t.Errorf("status %d stderr %q, want 1 and %q", status, stderr, alice)
	}
	if stderr, status := f.run(t, f.alice, "", true); status != 1 || stderr != strings.TrimSuffix(alice, "\n")+"\r\n" {
		t.Errorf("with a pty: status %d stderr %q", status, stderr)
	}
	if stderr, status := f.run(t, f.nobody, "", false); status != 1 || !strings.Contains(stderr, "this key is not registered") {
		t.Errorf("unregistered key: status %d stderr %q", status, stderr)
	}
	_, port, _ := net.SplitHostPort(f.addr)
	for _, tc := range []struct {
		key  clientKey
		args []string
		want string
	}{
		{f.alice, []string{"-T"}, alice},
		{f.alice, []string{"-tt"}, "Hi alice! You've successfully authenticated, but rgit does not provide shell access."},
		{f.nobody, []string{"-T"}, "this key is not registered"},
	} {
		cmd := exec.Command("ssh", append(tc.args, "-F", "/dev/null", "-i", tc.key.path, "-o", "IdentitiesOnly=yes",
			"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "LogLevel=ERROR", "-p", port, "git@127.0.0.1")...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("ssh %v: %v, output %q, want exit 1 and %q", tc.args, err, out, tc.want)
		}
	}
}

// rawConn connects to the server and reads its version line: a client
// that has not authenticated (yet).
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound for a broken server
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("version line: %v (%q)", err, line)
	}
	return c, r
}

// TestAuthTimeout: a connection that does not finish authenticating is
// closed after the authentication time, although it is far from idle for
// the idle timeout.
func TestAuthTimeout(t *testing.T) {
	// Generous: the authenticated connection below must finish its
	// handshake within it on a loaded machine.
	const limit = 2 * time.Second
	f := newFixture(t, nil, func(c *Config) { c.AuthTimeout = limit; c.IdleTimeout = time.Hour })
	start := time.Now()
	c, r := rawConn(t, f.addr)
	io.WriteString(c, "SSH-2.0-slowpoke\r\n")
	_, err := io.Copy(io.Discard, r) // the server's key exchange, then the close
	if err != nil {
		t.Fatalf("connection not closed: %v", err)
	}
	if d := time.Since(start); d < limit {
		t.Fatalf("closed after %s, before the authentication time", d)
	}
	// An authenticated connection outlives it.
	s, done := f.session(t, f.alice.signer)
	defer done()
	time.Sleep(limit + limit/2)
	if out, err := s.CombinedOutput(""); !strings.Contains(string(out), "Hi alice!") {
		t.Fatalf("session after the authentication time: %v %q", err, out)
	}
}

// TestUnauthenticatedPerAddress: connections from one address that have
// not authenticated with a registered key are capped: over the cap a
// connection is refused at once with the limit's message; a registered
// key gives its unit back once it authenticates, an unregistered one
// keeps it until it disconnects.
func TestUnauthenticatedPerAddress(t *testing.T) {
	limit := clientlimit.NewPerAddr(2, "RGIT_MAX_ANON_PER_ADDR")
	f := newFixture(t, nil, func(c *Config) { c.Unauthenticated = limit })
	refused := func(t *testing.T) {
		t.Helper()
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(c)
		if want := "too many unauthenticated connections from your address (limit 2, set RGIT_MAX_ANON_PER_ADDR)\r\n"; string(got) != want {
			t.Fatalf("over the cap: %q, want %q", got, want)
		}
	}
	a, _ := rawConn(t, f.addr)
	rawConn(t, f.addr)
	refused(t)
	a.Close()
	waitHeld(t, limit, f.addr, 1)
	// alice's connection counts until she has authenticated, then not.
	_, done := f.session(t, f.alice.signer)
	defer done()
	waitHeld(t, limit, f.addr, 1)
	_, doneAnon := f.session(t, f.nobody.signer)
	waitHeld(t, limit, f.addr, 2)
	refused(t)
	doneAnon()
	waitHeld(t, limit, f.addr, 1)
	rawConn(t, f.addr)
}

// waitHeld waits for the server to account for closes it has not seen
// yet.
func waitHeld(t *testing.T, p *clientlimit.PerAddr, addr string, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.Held(addr) != want; {
		if time.Now().After(deadline) {
			t.Fatalf("%d units held, want %d", p.Held(addr), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestChannelAndEnvLimits: a connection runs at most MaxChannels sessions
// at once (an anonymous one one), and a session keeps at most MaxEnv
// environment variables.
func TestChannelAndEnvLimits(t *testing.T) {
	f := newFixture(t, nil)
	dial := func(k clientKey) *gossh.Client {
		c, err := gossh.Dial("tcp", f.addr, &gossh.ClientConfig{User: "git", Auth: []gossh.AuthMethod{gossh.PublicKeys(k.signer)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, tc := range []struct {
		key  clientKey
		open int
		want string
	}{
		{f.alice, MaxChannels, "too many sessions on one connection (limit 8, fixed)"},
		{f.nobody, 1, "an unregistered key runs one session per connection (limit 1, fixed)"},
	} {
		c := dial(tc.key)
		var open []*gossh.Session
		for range tc.open {
			s, err := c.NewSession()
			if err != nil {
				t.Fatalf("session %d of %d: %v", len(open)+1, tc.open, err)
			}
			open = append(open, s)
		}
		_, err := c.NewSession()
		var oce *gossh.OpenChannelError
		if !errors.As(err, &oce) || oce.Message != tc.want {
			t.Errorf("session over the limit: %v, want %q", err, tc.want)
		}
		open[0].Close()
		var s *gossh.Session
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if s, err = c.NewSession(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("session after one closed: %v", err)
		}
		s.Close()
	}

	s, err := dial(f.alice).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range MaxEnv {
		if err := s.Setenv("V"+strconv.Itoa(i), "x"); err != nil {
			t.Fatalf("variable %d: %v", i, err)
		}
	}
	if err := s.Setenv("ONE_TOO_MANY", "x"); err == nil {
		t.Errorf("variable %d accepted", MaxEnv+1)
	}
	if err := s.Setenv("GIT_PROTOCOL", "version=2"); err == nil {
		t.Errorf("a variable after the limit accepted")
	}
	s2, err := dial(f.alice).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Setenv("BIG", strings.Repeat("x", MaxEnvBytes)); err == nil {
		t.Errorf("%d bytes of environment accepted", MaxEnvBytes)
	}
}

// TestSlowReaderCutOff: a client that does not read the answer is cut off
// after the stall time once the channel's window is full, and the session
// handler returns.
func TestSlowReaderCutOff(t *testing.T) {
	const stall = 300 * time.Millisecond
	eng := &floodEngine{done: make(chan error, 1)}
	f := newFixture(t, eng, func(c *Config) { c.StallTimeout = stall; c.MinRate = 64 << 10 })
	s, done := f.session(t, f.alice.signer)
	defer done()
	if _, err := s.StdoutPipe(); err != nil { // never read
		t.Fatal(err)
	}
	if err := s.Start("git-upload-pack 'alice/pub.git'"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-eng.done:
		if !errors.Is(err, clientlimit.ErrTooSlow) {
			t.Fatalf("writing to a client that reads nothing: %v, want ErrTooSlow", err)
		}
	case <-time.After(30 * time.Second): // a bound for a broken server
		t.Fatal("the session is still writing to a client that reads nothing")
	}
}

// floodEngine writes without end and reports why it stopped.
type floodEngine struct {
	once sync.Once
	done chan error
}

func (e *floodEngine) UploadPack(_ context.Context, _ gitproto.Backend, _ io.Reader, out io.Writer, _ gitproto.Options) error {
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for {
		if _, err := out.Write(chunk); err != nil {
			e.once.Do(func() { e.done <- err })
			return err
		}
	}
}

func (e *floodEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, o)
}

// TestHostKeyFiles: the public key is written beside the host key, and the
// known_hosts line names the server as ssh looks it up.
func TestHostKeyFiles(t *testing.T) {
	need.Tool(t, "ssh-keygen")
	f := newFixture(t, nil)
	pub, err := os.ReadFile(PublicKeyPath(f.hostKey))
	if err != nil {
		t.Fatal(err)
	}
	if want := gossh.MarshalAuthorizedKey(f.srv.HostKey()); !bytes.Equal(pub, want) {
		t.Fatalf("host_key.pub %q, want %q", pub, want)
	}
	out, err := exec.Command("ssh-keygen", "-y", "-f", f.hostKey).Output()
	if err != nil || !bytes.Equal(bytes.Fields(out)[1], bytes.Fields(pub)[1]) {
		t.Fatalf("ssh-keygen -y: %v %q, want the public key %q", err, out, pub)
	}
	names, err := KnownHostsNames("0.0.0.0:2222", "")
	if err != nil {
		t.Fatal(err)
	}
	line := KnownHostsLine(names, f.srv.HostKey())
	if want := "[127.0.0.1]:2222,[localhost]:2222 " + strings.TrimSpace(string(pub)); line != want {
		t.Errorf("known_hosts line %q, want %q", line, want)
	}
	for listen, want := range map[string]string{"[::]:22": "127.0.0.1,localhost ", "10.0.0.5:2222": "[10.0.0.5]:2222 "} {
		names, _ := KnownHostsNames(listen, "")
		if got := KnownHostsLine(names, f.srv.HostKey()); !strings.HasPrefix(got, want) {
			t.Errorf("listen %s: %q, want prefix %q", listen, got, want)
		}
	}
	names, _ = KnownHostsNames("0.0.0.0:2222", "git.example.com")
	if got := KnownHostsLine(names, f.srv.HostKey()); !strings.HasPrefix(got, "git.example.com ssh-ed25519 ") {
		t.Errorf("named host: %q", got)
	}
}
