package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
	"github.com/rgit/rgit/transport/node/version"
)

// The -X flags the Makefile's build target sets, with fixed values.
const (
	testVersion = "v9.9.9-test"
	testCommit  = "c0ffee"
	testDate    = "2025-01-02T03:04:05Z"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds rgit and rgit-admin once per test run, stamped the way
// `make build` stamps them.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "rgit-bin-")
		if buildErr != nil {
			return
		}
		pkg := "github.com/rgit/rgit/transport/node/version"
		ld := "-X " + pkg + ".version=" + testVersion + " -X " + pkg + ".commit=" + testCommit + " -X " + pkg + ".date=" + testDate
		cmd := exec.Command("go", "build", "-ldflags", ld, "-o", binDir+"/", "github.com/rgit/rgit/cmd/rgit", "github.com/rgit/rgit/cmd/rgit-admin")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// runBin runs a built binary with env (KEY=value) on top of a minimal
// environment and returns stdout, stderr and the exit code.
func runBin(t *testing.T, name string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), name), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestStartupErrorsAreOneLine: configuration and start-up errors print one
// line on stderr and exit 2, with no zap stack trace (before: the message,
// then "rgit stopped" with a goroutine stack, exit 1).
func TestStartupErrorsAreOneLine(t *testing.T) {
	base := []string{"RGIT_HTTP_ADDR=127.0.0.1:0", "RGIT_SSH_ADDR=127.0.0.1:0"}
	cases := []struct {
		name string
		env  func(t *testing.T) []string
		want []string
	}{
		{"unknown store scheme", func(*testing.T) []string { return []string{"RGIT_STORE_URL=foo://x"} },
			[]string{"RGIT_STORE_URL", `unknown scheme "foo"`}},
		{"two bad variables", func(*testing.T) []string { return []string{"RGIT_MAX_WARM=many", "RGIT_LOG_FORMAT=xml"} },
			[]string{"RGIT_MAX_WARM", "RGIT_LOG_FORMAT"}},
		{"mistyped variable", func(*testing.T) []string { return []string{"RGIT_HTTPADDR=127.0.0.1:0"} },
			[]string{"RGIT_HTTPADDR: unknown variable; did you mean RGIT_HTTP_ADDR?"}},
		{"a name without peers", func(*testing.T) []string { return []string{"RGIT_SELF=rgit-1"} },
			[]string{"RGIT_SELF: set without RGIT_PEER_SVC or RGIT_PEERS"}},
		{"missing bucket", func(t *testing.T) []string {
			srv := s3local.Start(t)
			return append(srv.Env(), "RGIT_STORE_URL=s3://nosuchbucket/t")
		}, []string{`"nosuchbucket"`, "http://127.0.0.1:", "NoSuchBucket"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runBin(t, "rgit", append(base, c.env(t)...), "serve")
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
			if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, ".go:") {
				t.Errorf("stderr carries a stack trace:\n%s", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %s: %s", w, stderr)
				}
			}
		})
	}
}

// TestVersionCommands: `rgit version` (-v, --version) and `rgit-admin
// version` print the stamped build; rgit-admin adds the node's version
// when it can reach one and, when it cannot, still prints its own but
// fails as unreachable (exit 4).
func TestVersionCommands(t *testing.T) {
	want := testVersion + " (commit " + testCommit + ", " + testDate + ", "
	for _, arg := range []string{"version", "--version", "-version", "-v"} {
		stdout, stderr, code := runBin(t, "rgit", nil, arg)
		if code != 0 || !strings.HasPrefix(stdout, "rgit "+want+"go1.") || stderr != "" {
			t.Errorf("rgit %s = %d %q %q, want rgit %s…", arg, code, stdout, stderr, want)
		}
	}

	closed := "127.0.0.1:" + strconv.Itoa(freePort(t))
	stdout, stderr, code := runBin(t, "rgit-admin", []string{"RGIT_ADMIN_ADDR=" + closed, "RGIT_PEER_SECRET=0123456789abcdef"}, "version")
	if code != 4 || !strings.HasPrefix(stdout, "rgit-admin "+want) || strings.Count(stdout, "\n") != 1 || !strings.Contains(stderr, "no node version") {
		t.Errorf("rgit-admin version without a node = %d %q %q", code, stdout, stderr)
	}

	node := gitenv.StartServer(t, gitenv.FileStore(t))
	stdout, stderr, code = runBin(t, "rgit-admin", []string{"RGIT_ADMIN_ADDR=" + node.AdminAddr, "RGIT_PEER_SECRET=" + node.PeerSecret}, "version")
	wantNode := "node " + node.AdminAddr + ": rgit " + version.Get().String() + "\n"
	if code != 0 || !strings.HasPrefix(stdout, "rgit-admin "+want) || !strings.HasSuffix(stdout, wantNode) || stderr != "" {
		t.Errorf("rgit-admin version with a node = %d %q %q, want a last line %q", code, stdout, stderr, wantNode)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestLogsAreJSONOnAPipe: with stderr on a pipe (a log collector) and no
// RGIT_LOG_FORMAT, every log line is a JSON object, and the start-up line
// carries the version.
func TestLogsAreJSONOnAPipe(t *testing.T) {
	lines := startupLog(t)
	if v, _ := lines[len(lines)-1]["version"].(string); !strings.HasPrefix(v, testVersion+" (commit "+testCommit) {
		t.Errorf("start-up line version = %q, want %s…", v, testVersion)
	}
}

// TestUnreachableRedisIsOneJSONLine: a node whose Redis cannot be reached
// starts, and says so in one JSON warning naming the address; go-redis
// adds no plain-text lines of its own.
func TestUnreachableRedisIsOneJSONLine(t *testing.T) {
	redis := "127.0.0.1:" + strconv.Itoa(freePort(t))
	var about []map[string]any
	for _, l := range startupLog(t, "RGIT_REDIS_URL=redis://"+redis+"/0") {
		if msg, _ := l["msg"].(string); strings.Contains(strings.ToLower(msg), "redis") || l["logger"] == "redis" {
			about = append(about, l)
		}
	}
	if len(about) != 1 || about[0]["level"] != "warn" || about[0]["redis"] != redis ||
		!strings.Contains(about[0]["msg"].(string), "Redis is unreachable") {
		t.Fatalf("lines about Redis: %v, want one warning that it is unreachable", about)
	}
}

// startupLog starts `rgit serve` with stderr on a pipe and env added, and
// returns its log lines up to "rgit serving" (the last), failing the test
// on any line that is not a JSON object.
func startupLog(t *testing.T, env ...string) []map[string]any {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(binaries(t), "rgit"), "serve")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"RGIT_STORE_URL=file://" + filepath.Join(dir, "data"),
		"RGIT_HTTP_ADDR=127.0.0.1:0", "RGIT_SSH_ADDR=127.0.0.1:0",
		"RGIT_PEER_ADDR=127.0.0.1:" + strconv.Itoa(freePort(t)-1)}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out []map[string]any
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("rgit exited before logging \"rgit serving\"")
			}
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("log line is not JSON: %q", line)
			}
			out = append(out, entry)
			if entry["msg"] == "rgit serving" {
				go func() {
					for range lines { // let the pipe drain until the exit
					}
				}()
				return out
			}
		case <-timeout:
			t.Fatal("no \"rgit serving\" line within a minute")
		}
	}
}
