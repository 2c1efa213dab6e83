// Package s3local runs a real S3-compatible server (versitygw with its
// POSIX backend) on loopback for tests and benchmarks.
//
// The binary is found through RGIT_VERSITYGW, then <repo root>/.tools/
// versitygw (built by `make tools`), then PATH. When it is missing, Start
// stops the test as testkit/need does: a loud skip, or a failure under CI.
//
// It may import anything (it is testkit); nothing outside tests imports it.
package s3local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/need"
	"github.com/rgit/rgit/testkit/syncbuf"
)

// Fixed test credentials and names.
const (
	AccessKey = "rgit-test-access"
	SecretKey = "rgit-test-secret-key"
	Region    = "us-east-1"
	Bucket    = "rgit-test"
)

// ErrNoBinary: versitygw was not found.
var ErrNoBinary = errors.New("versitygw binary not found (run `make tools`, or set RGIT_VERSITYGW)")

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string

	bin, addr, dir string
	log            *syncbuf.Buffer
	stopped        sync.Once

	mu     sync.Mutex
	cmd    *exec.Cmd     // the current process (Restart replaces it)
	exited chan struct{} // closed when cmd has exited
}

// Config returns an s3store.Config for the server's bucket under prefix.
func (s *Server) Config(prefix string) s3store.Config {
	return s3store.Config{
		Bucket:          s.Bucket,
		Prefix:          prefix,
		Endpoint:        s.Endpoint,
		Region:          s.Region,
		AccessKeyID:     s.AccessKey,
		SecretAccessKey: s.SecretKey,
	}
}

// Env returns the AWS_* environment (KEY=value) that points an
// s3://<bucket> store URL at this server.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT=" + s.Endpoint,
		"AWS_REGION=" + s.Region,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
	}
}

// Binary returns the path of versitygw, or ErrNoBinary.
func Binary() (string, error) {
	if p := os.Getenv("RGIT_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("RGIT_VERSITYGW=%s: %w", p, err)
		}
		return p, nil
	}
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, ".tools", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", ErrNoBinary
}

// repoRoot finds the nearest directory above the working directory that
// holds go.mod.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Start runs a server for the test, with its data in a test temp dir, and
// stops it at cleanup. See the package doc for what happens when the
// binary is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); errors.Is(err, ErrNoBinary) {
		need.Missing(t, "the S3 test server", err.Error()+"; run `make tools`")
	}
	s, err := StartProcess(t.TempDir())
	if err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stop versitygw: %v", err)
		}
	})
	return s
}

// StartProcess runs a server with its data under dir (which must exist)
// and creates the test bucket. The caller must Close it.
func StartProcess(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	// A free port can be taken by someone else between probing and binding;
	// try a few ports before giving up.
	for attempt := 0; ; attempt++ {
		s, err := start(bin, dir)
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			return nil, err
		}
	}
}

func start(bin, dir string) (*Server, error) {
	port, err := freeport.Run(1)
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &Server{
		Endpoint:  "http://" + addr,
		Bucket:    Bucket,
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		Region:    Region,
		bin:       bin,
		addr:      addr,
		dir:       dir,
		log:       &syncbuf.Buffer{},
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	if err := s.createBucket(); err != nil {
		s.Close()
		return nil, fmt.Errorf("versitygw on %s: create bucket: %w; output:\n%s", addr, err, s.log.String())
	}
	return s, nil
}

// run starts the process on s.addr and waits until it answers.
func (s *Server) run() error {
	cmd := exec.Command(s.bin, "--port", s.addr, "--access", AccessKey, "--secret", SecretKey,
		"--region", Region, "--quiet", "posix", s.dir)
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := waitReady(s.addr, exited, 15*time.Second); err != nil {
		_ = s.Kill()
		return fmt.Errorf("versitygw on %s: %w; output:\n%s", s.addr, err, s.log.String())
	}
	return nil
}

// Pause stops the server with SIGSTOP: the kernel still accepts
// connections and takes request bytes, but nothing answers (a hung
// store). Resume continues it.
// Pause returns once every thread of the server is stopped: kill(2)
// returns before the signal reaches threads running on other CPUs, and a
// request sent meanwhile could still be answered.
func (s *Server) Pause() error {
	p := s.process()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(p.Pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw (pid %d) not stopped 10 s after SIGSTOP", p.Pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// allStopped reports whether every thread of pid is in the stopped
// state (T in /proc/{pid}/task/{tid}/stat).
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.process().Signal(syscall.SIGCONT) }

// Kill kills the server: connections are refused until Restart.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	_ = cmd.Process.Kill()
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("versitygw did not exit after kill")
	}
}

// Restart starts a killed server again on the same address and data.
func (s *Server) Restart() error { return s.run() }

func (s *Server) process() *os.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process
}

// waitReady polls until the server answers HTTP, or it exits, or timeout.
func waitReady(addr string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return nil // any answer (403 unauthenticated) means it is serving
		}
		select {
		case <-exited:
			return errors.New("exited before answering")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %w", timeout, err)
		}
	}
}

func (s *Server) createBucket() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s3store.New(ctx, s.Config(""))
	if err != nil {
		return err
	}
	_, err = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket})
	return err
}

// Output returns what the server has printed so far.
func (s *Server) Output() string { return s.log.String() }

// Close stops the server. Its data directory is left to the caller.
func (s *Server) Close() error {
	var err error
	s.stopped.Do(func() { err = s.Kill() })
	return err
}

// FaultProxy starts a proxy in front of the server that answers 500 (an
// S3 InternalError) to the requests fail picks, without forwarding them,
// and forwards every other; it returns the proxy's endpoint URL, to use in
// place of Endpoint. The proxy stops with the test.
func (s *Server) FaultProxy(t testing.TB, fail func(*http.Request) bool) string {
	t.Helper()
	rp, err := s.reverseProxy()
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail(r) {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "<Error><Code>InternalError</Code><Message>injected by s3local.FaultProxy</Message></Error>", http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	return ps.URL
}

func (s *Server) reverseProxy() (*httputil.ReverseProxy, error) {
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3local endpoint: %w", err)
	}
	return httputil.NewSingleHostReverseProxy(target), nil
}

// HoldProxy is a proxy in front of a Server that forwards every request
// but can keep back the answer to one: the store carries that request
// out and its client never hears so. A test kills the client then, at
// the moment the store holds more than the client has acted on. Its URL
// replaces Endpoint (AWS_ENDPOINT).
type HoldProxy struct {
	URL  string
	rp   *httputil.ReverseProxy
	stop chan struct{}
	mu   sync.Mutex
	pick func(*http.Request) bool
	held chan int
}

// StartHoldProxy starts a HoldProxy that holds nothing yet; it stops with
// the test.
func (s *Server) StartHoldProxy(t testing.TB) *HoldProxy {
	t.Helper()
	rp, err := s.reverseProxy()
	if err != nil {
		t.Fatal(err)
	}
	p := &HoldProxy{rp: rp, stop: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.stop) // let a held request go, so that Close returns
		srv.Close()
	})
	p.URL = srv.URL
	return p
}

// Hold arms the proxy for the next request pick chooses: it is forwarded,
// the store's answer is read and dropped, and its status is sent on the
// returned channel; the request then waits until its client goes away.
// Requests after it are forwarded as usual.
func (p *HoldProxy) Hold(pick func(*http.Request) bool) <-chan int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pick, p.held = pick, make(chan int, 1)
	return p.held
}

func (p *HoldProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	held := p.held
	picked := p.pick != nil && p.pick(r)
	if picked {
		p.pick = nil
	}
	p.mu.Unlock()
	if !picked {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := &finalStatus{ResponseRecorder: httptest.NewRecorder()}
	p.rp.ServeHTTP(rec, r)
	held <- rec.code
	select {
	case <-r.Context().Done():
	case <-p.stop:
	}
}

// finalStatus records the final status of an answer; a 100 Continue
// the store sends first (to a PUT with Expect) is not it.
type finalStatus struct {
	*httptest.ResponseRecorder
	code int
}

func (f *finalStatus) WriteHeader(code int) {
	if code >= 200 && f.code == 0 {
		f.code = code
	}
	f.ResponseRecorder.WriteHeader(code)
}

func (f *finalStatus) Write(b []byte) (int, error) {
	if f.code == 0 {
		f.code = http.StatusOK
	}
	return f.ResponseRecorder.Write(b)
}

// SlowProxy is a proxy in front of a Server that holds every request for
// its current delay before forwarding it: a store that answers, slowly.
// Its URL replaces Endpoint (AWS_ENDPOINT).
type SlowProxy struct {
	URL   string
	delay atomic.Int64
	srv   *httptest.Server
}

// StartSlowProxy starts a SlowProxy with no delay; Close stops it.
func (s *Server) StartSlowProxy() (*SlowProxy, error) {
	rp, err := s.reverseProxy()
	if err != nil {
		return nil, err
	}
	p := &SlowProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(p.delay.Load()); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return // the client gave up waiting
			}
		}
		rp.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	return p, nil
}

// SetDelay sets the delay of every request that arrives from now on.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops the proxy.
func (p *SlowProxy) Close() { p.srv.Close() }
