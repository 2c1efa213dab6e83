package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/syncbuf"
	"github.com/rgit/rgit/transport/product/admin"
)

// benchOwner owns every benchmark repository on the rgit side.
const benchOwner = "bench"

// rgitServer is `rgit serve` running as a child process, so its peak RSS
// can be read when it exits.
type rgitServer struct {
	cmd       *exec.Cmd
	httpAddr  string
	adminAddr string
	secret    string
	log       *syncbuf.Buffer
	exited    chan struct{}
}

// rgitEnv is what distinguishes one rgit deployment: store, cache, extra
// environment (AWS_* for s3).
type rgitEnv struct {
	bin      string
	storeURL string
	cacheDir string
	hostKey  string
	extra    []string
}

// startRgit starts a node and waits until /healthz answers. The peer port
// must be followed by a free port (the admin stream port), so ports are
// probed here; a lost race is retried.
func startRgit(ctx context.Context, e rgitEnv) (*rgitServer, error) {
	var last error
	for range 3 {
		s, err := tryStartRgit(ctx, e)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func tryStartRgit(ctx context.Context, e rgitEnv) (*rgitServer, error) {
	httpPort, err := freeport.Run(1)
	if err != nil {
		return nil, err
	}
	peerPort, err := freeport.Run(2)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	s := &rgitServer{
		httpAddr:  "127.0.0.1:" + strconv.Itoa(httpPort),
		adminAddr: "127.0.0.1:" + strconv.Itoa(peerPort+1),
		secret:    hex.EncodeToString(secret),
		log:       &syncbuf.Buffer{},
		exited:    make(chan struct{}),
	}
	s.cmd = exec.Command(e.bin, "serve")
	s.cmd.Env = append(os.Environ(), append([]string{
		"RGIT_STORE_URL=" + e.storeURL,
		"RGIT_CACHE_DIR=" + e.cacheDir,
		"RGIT_HOST_KEY=" + e.hostKey,
		"RGIT_HTTP_ADDR=" + s.httpAddr,
		"RGIT_SSH_ADDR=127.0.0.1:0",
		"RGIT_PEER_ADDR=127.0.0.1:" + strconv.Itoa(peerPort),
		"RGIT_PEER_SECRET=" + s.secret,
		"RGIT_LOG_LEVEL=warn",
		"RGIT_DRAIN_SECS=10",
	}, e.extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", e.bin, err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The admin port opens after the HTTP port: wait for both.
		resp, err := http.Get("http://" + s.httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && listening(s.adminAddr) {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("rgit serve exited during start: %s", lastLines(s.log.Bytes(), 10))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("rgit serve not healthy after 30s: %s", lastLines(s.log.Bytes(), 10))
		}
	}
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stop drains the node with SIGTERM and returns its peak RSS in KB.
func (s *rgitServer) stop() (int64, error) {
	hwm := procHWM(strconv.Itoa(s.cmd.Process.Pid)) // read while it still runs
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return hwm, errors.New("rgit serve did not stop within 30s of SIGTERM")
	}
	return hwm, nil
}

// admin runs one admin command and returns its output.
func (s *rgitServer) admin(ctx context.Context, cmd string, args ...string) (string, error) {
	var out bytes.Buffer
	m, err := admin.Parse(cmd, args)
	if err == nil {
		err = admin.Call(ctx, s.adminAddr, s.secret, m, io.Discard, &out)
	}
	if err != nil {
		return "", fmt.Errorf("rgit-admin %s %s: %w", cmd, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out.String()), nil
}

func (s *rgitServer) url(token, repo string) string {
	return "http://" + benchOwner + ":" + token + "@" + s.httpAddr + "/" + benchOwner + "/" + repo + ".git"
}

// metric reads one sample of the node's /metrics (name with its labels,
// as the exposition format prints it); found is false when the node does
// not export it. A single node serves /metrics on its admin port.
func (s *rgitServer) metric(ctx context.Context, name string) (v float64, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.adminAddr+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("metrics: %s", resp.Status)
	}
	v, found, err = metricValue(string(b), name)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: %w", err)
	}
	return v, found, nil
}

// metricValue finds the sample called name (labels included) in a
// Prometheus text exposition.
func metricValue(text, name string) (float64, bool, error) {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, true, fmt.Errorf("%s: %w", name, err)
			}
			return f, true, nil
		}
	}
	return 0, false, nil
}

// publishFixture creates benchOwner/{fixture} on srv, mirrors the fixture
// into it and makes it public: the repository the read benches read.
func publishFixture(ctx context.Context, srv *rgitServer, f *fixture.Fixture) error {
	token, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return err
	}
	if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+f.Name); err != nil {
		return err
	}
	if _, err := timeGit(ctx, f.Dir, "push", "-q", "--mirror", srv.url(token, f.Name)); err != nil {
		return err
	}
	_, err = srv.admin(ctx, "set-visibility", benchOwner+"/"+f.Name, "public")
	return err
}
