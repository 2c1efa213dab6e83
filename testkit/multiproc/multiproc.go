// Package multiproc runs a cluster of real `rgit serve` processes on
// loopback for multi-process tests and benchmarks: one shared store
// (file:// unless Options.StoreURL says otherwise), a separate cache directory per node, the static peer map
// (RGIT_PEERS) and RGIT_SELF=rgit-0..N-1. Nodes can be killed with SIGKILL,
// stopped with SIGTERM and restarted on the same ports, with another
// binary for upgrade tests (BuildRelease builds an earlier release from
// the repository's history; Node.SetBin, Fleet.Bin).
//
// It is testkit: it may import anything; only tests and cmd/rgit-bench use
// it. It reports errors rather than taking a testing.TB so the benchmark
// can use it too.
package multiproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// Build compiles ./cmd/rgit from the module at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	return build(ctx, root, dir)
}

func build(ctx context.Context, root, dir string, flags ...string) (string, error) {
	bin := filepath.Join(dir, "rgit")
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-o", bin}, flags...), "./cmd/rgit")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/rgit: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildRelease compiles ./cmd/rgit as it was at commit of the git
// repository at root into dir/rgit, from a copy of that commit's tree
// (git archive, so nothing is left registered in the repository) that is
// removed afterwards. The binary reports commit as its version's commit
// (rgit-admin version, the rollout status). It appears under its final
// name only once complete, so concurrent builds into one dir are safe.
func BuildRelease(ctx context.Context, root, commit, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	archive.Stderr, untar.Stdin, untar.Stderr = &stderr, pipe, &stderr
	if err := untar.Start(); err != nil {
		return "", err
	}
	aerr := archive.Run()
	if err := errors.Join(aerr, untar.Wait()); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", commit, err, stderr.String())
	}
	// The version package moved; the linker ignores the path a commit lacks.
	stamp := "-X github.com/rgit/rgit/cmd/version.commit=" + commit + " -X github.com/rgit/rgit/transport/node/version.commit=" + commit
	tmp, err := build(ctx, src, src, "-trimpath", "-ldflags="+stamp)
	if err != nil {
		return "", fmt.Errorf("release %s: %w", commit, err)
	}
	bin := filepath.Join(dir, "rgit")
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Node is one rgit process.
type Node struct {
	Name                 string
	HTTPAddr, SSHAddr    string
	PeerAddr, StreamAddr string // peer HTTP, peer stream (admin) ports
	MetricsAddr          string // /metrics (RGIT_METRICS_ADDR: plain HTTP even with peer TLS)
	LogPath              string
	env                  []string
	bin                  string
	mu                   sync.Mutex
	servedBefore         int // "rgit serving" lines in the log before the last Start
	cmd                  *exec.Cmd
	done                 chan struct{}
	exitErr              error
	// reserved holds the ports of a node not started yet, so that no
	// connection of the meantime takes one as its local port (they are in
	// the ephemeral range); the first Start lets them go.
	reserved []net.Listener
}

// Cluster is N nodes on one store.
type Cluster struct {
	Nodes  []*Node
	Secret string
	Dir    string
	// StoreURL is the nodes' RGIT_STORE_URL.
	StoreURL string
	// TLS is the peer TLS Admin uses (Options.PeerTLS); nil: plaintext.
	TLS *peertls.Config
}

// Options configure Start.
type Options struct {
	Bin   string // rgit binary (Build)
	Dir   string // working directory for store, caches, keys and logs
	Nodes int
	// Running is how many nodes Start launches, the first ones (0: all):
	// the static map names all Nodes, and the others are started later
	// (Node.Start), as a fleet scaling out.
	Running int
	Env     []string // extra KEY=value for every node
	// StoreURL is the store every node uses (the credentials, if any, in
	// Env); default: a file store under Dir.
	StoreURL string
	// PeerTLS, when set, turns on peer TLS on every node with these files.
	PeerTLS peertls.Files
}

// Start launches the nodes (the first o.Running) and waits until each
// answers /ready.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	c := &Cluster{Secret: "multiproc-secret-0123456789", Dir: o.Dir, StoreURL: o.StoreURL}
	if c.StoreURL == "" {
		c.StoreURL = "file://" + filepath.Join(o.Dir, "store")
	}
	var err error
	if c.TLS, err = peertls.Load(o.PeerTLS); err != nil {
		return nil, err
	}
	ports, err := freeport.Runs(o.Nodes*4, 2) // a peer port is followed by its stream port
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := 0; i < o.Nodes; i++ {
		p := ports[i*4 : i*4+4]
		n := &Node{
			Name:        fmt.Sprintf("rgit-%d", i),
			HTTPAddr:    fmt.Sprintf("127.0.0.1:%d", p[0]),
			SSHAddr:     fmt.Sprintf("127.0.0.1:%d", p[1]),
			PeerAddr:    fmt.Sprintf("127.0.0.1:%d", p[2]),
			StreamAddr:  fmt.Sprintf("127.0.0.1:%d", p[2]+1),
			MetricsAddr: fmt.Sprintf("127.0.0.1:%d", p[3]),
			bin:         o.Bin,
		}
		peers = append(peers, n.Name+"="+n.PeerAddr)
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		nd := filepath.Join(o.Dir, n.Name)
		if err := os.MkdirAll(filepath.Join(nd, "cache"), 0o755); err != nil {
			return nil, err
		}
		n.LogPath = filepath.Join(nd, "rgit.log")
		n.env = append(os.Environ(),
			"RGIT_STORE_URL="+c.StoreURL,
			"RGIT_CACHE_DIR="+filepath.Join(nd, "cache"),
			"RGIT_HOST_KEY="+filepath.Join(nd, "host_key"),
			"RGIT_HTTP_ADDR="+n.HTTPAddr,
			"RGIT_SSH_ADDR="+n.SSHAddr,
			"RGIT_PEER_ADDR="+n.PeerAddr,
			"RGIT_METRICS_ADDR="+n.MetricsAddr,
			"RGIT_PEERS="+strings.Join(peers, ","),
			"RGIT_SELF="+n.Name,
			"RGIT_PEER_SECRET="+c.Secret,
			"RGIT_LOG_LEVEL=info",
			"RGIT_DRAIN_SECS=10",
		)
		if o.PeerTLS.Enabled() {
			n.env = append(n.env, peertls.EnvCert+"="+o.PeerTLS.Cert, peertls.EnvKey+"="+o.PeerTLS.Key, peertls.EnvCA+"="+o.PeerTLS.CA)
		}
		n.env = append(n.env, o.Env...)
	}
	running := c.Nodes
	if o.Running > 0 {
		running = c.Nodes[:o.Running]
		for _, n := range c.Nodes[o.Running:] {
			if err := n.reserve(); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	for _, n := range running {
		if err := n.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range running {
		if err := n.WaitReady(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// reserve listens on the node's ports until its first Start.
func (n *Node) reserve() error {
	for _, a := range []string{n.HTTPAddr, n.SSHAddr, n.PeerAddr, n.StreamAddr, n.MetricsAddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("reserve %s's port %s: %w", n.Name, a, err)
		}
		n.reserved = append(n.reserved, l)
	}
	return nil
}

// Start (re)starts the node's process on its ports; logs append.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range n.reserved {
		l.Close()
	}
	n.reserved = nil
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.servedBefore = strings.Count(n.Log(), servingLine)
	cmd := exec.Command(n.bin, "serve")
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	done := n.done
	go func() {
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.exitErr = err
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

// SetBin makes the node's next Start run bin (an upgrade or a
// downgrade of the node).
func (n *Node) SetBin(bin string) {
	n.mu.Lock()
	n.bin = bin
	n.mu.Unlock()
}

// Pid is the running process's id (0 when not started).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// servingLine is what a node logs once every listener is up.
const servingLine = `"msg":"rgit serving"`

// WaitReady polls /ready until it answers 200 and the process has logged
// that every listener is up: /ready alone may come before the admin port
// is bound, or from another process that took the port (tests of other
// packages pick free ports too) while this one failed to bind it.
func (n *Node) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + n.HTTPAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			n.mu.Lock()
			before := n.servedBefore
			n.mu.Unlock()
			if resp.StatusCode == http.StatusOK && n.Running() && strings.Count(n.Log(), servingLine) > before {
				return nil
			}
		}
		if !n.Running() {
			return fmt.Errorf("%s exited before ready:\n%s", n.Name, n.LogTail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w\n%s", n.Name, ctx.Err(), n.LogTail(30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL and waits for the process to die.
func (n *Node) Kill() error { return n.signal(syscall.SIGKILL, 10*time.Second) }

// Term sends SIGTERM and waits (up to timeout) for a clean exit.
func (n *Node) Term(timeout time.Duration) error {
	if err := n.signal(syscall.SIGTERM, timeout); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exitErr != nil {
		return fmt.Errorf("%s exited with %w after SIGTERM", n.Name, n.exitErr)
	}
	return nil
}

func (n *Node) signal(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", n.Name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %s after %s", n.Name, timeout, sig)
	}
}

// Log returns the node's log so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.LogPath)
	return string(b)
}

// LogTail returns the last lines lines of the log.
func (n *Node) LogTail(lines int) string {
	l := strings.Split(strings.TrimRight(n.Log(), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Admin runs an admin command line (admin.Parse: add-key's key is the key
// itself) on the node.
func (c *Cluster) Admin(ctx context.Context, n *Node, command string, args ...string) (string, error) {
	m, err := admin.Parse(command, args)
	if err != nil {
		return "", err
	}
	var progress bytes.Buffer
	r, err := admin.Do(ctx, n.StreamAddr, c.TLS, c.Secret, m, &progress)
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// Stop kills every running node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n.Running() {
			_ = n.Kill()
		}
		n.mu.Lock()
		for _, l := range n.reserved {
			l.Close()
		}
		n.reserved = nil
		n.mu.Unlock()
	}
}

// HTTPURL is repo's smart-HTTP URL on node n with token as the password.
func (n *Node) HTTPURL(token, repo string) string {
	return "http://x:" + token + "@" + n.HTTPAddr + "/" + repo + ".git"
}

// SSHURL is repo's SSH URL on node n.
func (n *Node) SSHURL(repo string) string {
	return "ssh://git@" + n.SSHAddr + "/" + repo + ".git"
}

// Fleet is the cluster as the rollout gate drives it (admin.Fleet):
// Update restarts node i in place with SIGTERM (the node drains) and a
// new process on the same ports; Status reads its rollout status.
type Fleet struct {
	C *Cluster
	// BeforeTerm, if set, runs before the SIGTERM: what Kubernetes and the
	// load balancer do for a terminating pod (out of rotation, requests
	// in flight finish), which a test's client-side balancer mimics.
	BeforeTerm  func(i int)
	TermTimeout time.Duration // default 30s
	// Bin, if set, is the binary Update starts: the fleet is upgraded.
	Bin string
}

// Size is the number of nodes.
func (f *Fleet) Size(context.Context) (int, error) { return len(f.C.Nodes), nil }

// Update restarts node i and returns once the new process runs.
func (f *Fleet) Update(_ context.Context, i int) error {
	n := f.C.Nodes[i]
	if f.BeforeTerm != nil {
		f.BeforeTerm(i)
	}
	timeout := f.TermTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if err := n.Term(timeout); err != nil {
		return err
	}
	if f.Bin != "" {
		n.SetBin(f.Bin)
	}
	return n.Start()
}

// Status reads node i's rollout status from its peer HTTP port.
func (f *Fleet) Status(ctx context.Context, i int) (admin.RolloutStatus, error) {
	return admin.FetchRollout(ctx, f.C.Nodes[i].PeerAddr, f.C.Secret)
}

// APIServe is an `rgit api-serve` process in front of a cluster's peer
// service.
type APIServe struct {
	Addr    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartAPIServe runs bin's `api-serve` on c's store in front of via's
// peer service, with env added (the store's credentials, RGIT_REDIS_URL),
// and returns once it serves. Its log is api-serve.log under c.Dir.
func (c *Cluster) StartAPIServe(ctx context.Context, bin string, via *Node, env ...string) (*APIServe, error) {
	port, err := freeport.Run(1)
	if err != nil {
		return nil, err
	}
	a := &APIServe{Addr: fmt.Sprintf("127.0.0.1:%d", port), LogPath: filepath.Join(c.Dir, "api-serve.log"), done: make(chan struct{})}
	f, err := os.Create(a.LogPath)
	if err != nil {
		return nil, err
	}
	a.cmd = exec.Command(bin, "api-serve")
	a.cmd.Env = append(os.Environ(), "RGIT_STORE_URL="+c.StoreURL, "RGIT_PEER_SECRET="+c.Secret,
		"RGIT_UPSTREAM=http://"+via.PeerAddr, "RGIT_API_ADDR="+a.Addr)
	a.cmd.Env = append(a.cmd.Env, env...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start api-serve: %w", err)
	}
	go func() { a.cmd.Wait(); f.Close(); close(a.done) }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if resp, err := http.Get("http://" + a.Addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(a.Log(), "rgit api-serve serving") {
				return a, nil
			}
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("api-serve exited at start:\n%s", a.Log())
		case <-ctx.Done():
			a.Stop()
			return nil, fmt.Errorf("api-serve not serving: %w\n%s", ctx.Err(), a.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Log returns api-serve's log so far.
func (a *APIServe) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// Stop kills api-serve and waits for it to exit.
func (a *APIServe) Stop() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

// Ack is a push the cluster acknowledged: Ref of Repo set to Want.
type Ack struct {
	Repo, Ref, Want string
	Node            string // the node it went through
}

// Lost returns the acknowledged pushes that heads (repository → ref →
// object id, as ParseLsRemote reads them after the load) does not show.
// Each ack must name a ref no other push moves.
func Lost(acked []Ack, heads map[string]map[string]string) []Ack {
	var lost []Ack
	for _, a := range acked {
		if heads[a.Repo][a.Ref] != a.Want {
			lost = append(lost, a)
		}
	}
	return lost
}

// ParseLsRemote reads `git ls-remote` output into ref → object id.
func ParseLsRemote(out string) map[string]string {
	refs := map[string]string{}
	for line := range strings.Lines(out) {
		if sha, ref, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			refs[ref] = sha
		}
	}
	return refs
}
