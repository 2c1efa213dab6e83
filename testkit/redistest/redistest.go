// Package redistest starts a real redis-server (the Debian package) on a
// free loopback port for a test, with no persistence, and stops it at
// cleanup. Tests needing it skip outside CI when redis-server is missing
// (testkit/need). It imports the standard library and testkit only.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/need"
)

// Server is a running redis-server.
type Server struct {
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start runs redis-server with the given extra directives ("maxmemory
// 2mb", "maxmemory-policy volatile-lru") until the test ends.
func Start(t testing.TB, directives ...string) *Server {
	t.Helper()
	need.Tool(t, "redis-server")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freeport.Run(1)
		if err != nil {
			t.Fatal(err)
		}
		s, err := start(t, port, directives)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("redis-server: %v", lastErr)
	return nil
}

func start(t testing.TB, port int, directives []string) (*Server, error) {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--loglevel", "warning"}
	for _, d := range directives {
		f := strings.Fields(d)
		args = append(args, "--"+f[0])
		args = append(args, f[1:]...)
	}
	cmd := exec.Command("redis-server", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	var logTail []string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Kill)
	// Ready when it answers PING; the log explains a failure to start.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case l, ok := <-lines:
			if ok {
				logTail = append(logTail, l)
			} else {
				lines = nil
			}
		case <-s.done:
			return nil, fmt.Errorf("redis-server exited at start: %s", strings.Join(logTail, "\n"))
		case <-deadline:
			s.Kill()
			return nil, fmt.Errorf("redis-server did not answer PING within 10s: %s", strings.Join(logTail, "\n"))
		case <-tick.C:
			if ping(s.Addr) {
				go func() {
					for range lines { // keep draining so the server never blocks on its log
					}
				}()
				return s, nil
			}
		}
	}
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Kill stops the server at once (SIGKILL) and waits for it to exit; the
// port then refuses connections. Idempotent.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	<-s.done
}
