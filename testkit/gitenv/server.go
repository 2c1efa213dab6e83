package gitenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/s3local"
	"github.com/rgit/rgit/testkit/syncbuf"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
	"github.com/rgit/rgit/transport/product/admin"
)

// Store is where a test server keeps its data.
type Store struct {
	Name string   // "file" or "s3", for subtest names
	URL  string   // RGIT_STORE_URL
	Env  []string // AWS_* settings the server process needs (KEY=value)
}

// FileStore is a file:// store in a test temp directory.
func FileStore(t testing.TB) Store {
	return Store{Name: "file", URL: "file://" + t.TempDir()}
}

// S3Store starts a versitygw server for the test (skipping loudly when it
// is not installed, see s3local) and returns an s3:// store under prefix.
func S3Store(t testing.TB, prefix string) Store {
	srv := s3local.Start(t)
	return Store{Name: "s3", URL: "s3://" + srv.Bucket + "/" + prefix, Env: srv.Env()}
}

// Server is an in-process rgit node for end-to-end tests. Its logs are
// kept in memory and printed (tail) when the test fails.
type Server struct {
	*node.Server
	Store Store
	cfg   *config.Config
	opts  []node.Option
	log   *zap.Logger
	logs  *syncbuf.Buffer
}

// StartServer starts a node on store with loopback listeners on free ports
// and a fresh cache and host key, and shuts it down at test cleanup. vars
// ("RGIT_X=value") override the test defaults. The store's environment is
// set with t.Setenv, so the calling test must not be parallel.
func StartServer(t testing.TB, store Store, vars ...string) *Server {
	t.Helper()
	return StartServerOpts(t, store, nil, vars...)
}

// StartServerOpts is StartServer with serve options (probe intervals).
func StartServerOpts(t testing.TB, store Store, opts []node.Option, vars ...string) *Server {
	t.Helper()
	for _, kv := range store.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	logs := &syncbuf.Buffer{}
	s := &Server{Store: store, logs: logs, opts: opts}
	s.log = zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(logs), zap.InfoLevel))
	var lastErr error
	// The admin port is probed free and then bound by the server; someone
	// else may take it in between, so try a few times.
	for attempt := 0; attempt < 3; attempt++ {
		peer, err := freePeerAddr()
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{
			"RGIT_STORE_URL":  store.URL,
			"RGIT_CACHE_DIR":  filepath.Join(dir, "cache"),
			"RGIT_HOST_KEY":   filepath.Join(dir, "host_key"),
			"RGIT_HTTP_ADDR":  "127.0.0.1:0",
			"RGIT_SSH_ADDR":   "127.0.0.1:0",
			"RGIT_PEER_ADDR":  peer,
			"RGIT_LOG_LEVEL":  "info",
			"RGIT_DRAIN_SECS": "10",
		}
		for _, kv := range vars {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		if s.cfg, err = config.Parse(func(k string) string { return env[k] }); err != nil {
			t.Fatalf("config: %v", err)
		}
		if err := os.MkdirAll(s.cfg.CacheDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("start rgit: %v\n%s", lastErr, s.LogTail(40))
	}
	t.Cleanup(func() {
		if s.Server != nil {
			if err := s.shutdown(); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("rgit log (%s, last lines):\n%s", store.Name, s.LogTail(60))
		}
	})
	return s
}

func (s *Server) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := node.Start(ctx, s.cfg, s.log, s.opts...)
	if err != nil {
		return err
	}
	s.Server = srv
	return nil
}

func (s *Server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Server.Shutdown(ctx)
	s.Server = nil
	return err
}

// Restart shuts the node down and starts it again on the same store,
// cache directory and host key (the listeners get new ports).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.shutdown(); err != nil {
		t.Fatalf("shutdown before restart: %v", err)
	}
	// The old admin port may linger briefly; listeners are :0 otherwise.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		peer, perr := freePeerAddr()
		if perr != nil {
			t.Fatal(perr)
		}
		s.cfg.PeerAddr = peer
	}
	t.Fatalf("restart: %v\n%s", err, s.LogTail(40))
}

// freePeerAddr returns a loopback RGIT_PEER_ADDR whose stream port
// (port + 1) was free a moment ago too.
func freePeerAddr() (string, error) {
	p, err := freeport.Run(2)
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}

// AdminTry runs an admin command line (admin.Parse: add-key's key is the
// key itself) and returns its output or error.
func (s *Server) AdminTry(command string, args ...string) (string, error) {
	m, err := admin.Parse(command, args)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	err = admin.Call(ctx, s.AdminAddr, s.PeerSecret, m, &progress, &out)
	return strings.TrimRight(out.String(), "\n"), err
}

// Admin runs an admin command and fails the test if it fails.
func (s *Server) Admin(t testing.TB, command string, args ...string) string {
	t.Helper()
	out, err := s.AdminTry(command, args...)
	if err != nil {
		t.Fatalf("admin %s %v: %v\n%s", command, args, err, s.LogTail(20))
	}
	return out
}

// CreateRepo creates owner/name.
func (s *Server) CreateRepo(t testing.TB, repo string) { s.Admin(t, "create-repo", repo) }

// AddToken creates a token for owner and returns it.
func (s *Server) AddToken(t testing.TB, owner string) string {
	t.Helper()
	out := s.Admin(t, "add-token", owner)
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// AddKey registers key's public half for owner.
func (s *Server) AddKey(t testing.TB, owner string, key Key) {
	t.Helper()
	pub, err := os.ReadFile(key.Public)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdminTry("add-key", owner, string(pub)); err != nil {
		t.Fatalf("add-key %s: %v", owner, err)
	}
}

// HTTPURL is the smart-HTTP URL of repo ("owner/name"), with token as the
// Basic password when it is not empty.
func (s *Server) HTTPURL(token, repo string) string {
	if token == "" {
		return "http://" + s.HTTPAddr + "/" + repo + ".git"
	}
	return "http://x:" + token + "@" + s.HTTPAddr + "/" + repo + ".git"
}

// SSHURL is the SSH URL of repo ("owner/name").
func (s *Server) SSHURL(repo string) string {
	return "ssh://git@" + s.SSHAddr + "/" + repo + ".git"
}

// LogTail returns the last n lines the server logged.
func (s *Server) LogTail(n int) string {
	b := s.logs.Bytes()
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Metric is the value of one series (a name with its labels, as
// Prometheus prints it: `rgit_x_total{kind="a"}`) on the /metrics of the
// node whose metrics listen on addr, and whether the series is there.
func Metric(t testing.TB, addr, series string) (float64, bool) {
	t.Helper()
	for _, l := range strings.Split(MetricsPage(t, addr), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f, true
		}
	}
	return 0, false
}

// MetricsPage is the /metrics page of the node whose metrics listen on
// addr.
func MetricsPage(t testing.TB, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
