package node_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/gitenv"
)

// TestReadmeQuickStart runs README.md's quick start as written: the first
// ```sh block after "With the server running" (HTTP) and the one after it
// (SSH), then the read API's examples up to the first elided commit id,
// against `bin/rgit serve` started the way
// `make run` starts it (working directory = where the data goes, default
// ./data, ./cache, ./host_key).
//
// Deviations, all forced by running next to other tests: the server listens
// on free ports, so the script's 127.0.0.1:8080 and 127.0.0.1:2222 are
// rewritten to those ports and RGIT_ADMIN_ADDR is exported for rgit-admin's
// default 127.0.0.1:8082; ~/.ssh/id_ed25519 is generated in a temp HOME and
// passed to ssh with -i, and ~/.ssh/known_hosts with UserKnownHostsFile
// (ssh reads the passwd home, not $HOME). ssh checks the host key
// strictly (StrictHostKeyChecking=yes): the SSH block works only if its
// own steps put the server's key in known_hosts. The SSH block runs in a
// second shell, see below.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := quickStartBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/rgit", "./cmd/rgit-admin")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	free, err := freeport.Runs(3, 2) // the admin port follows the peer port
	if err != nil {
		t.Fatal(err)
	}
	httpPort, sshPort, peerPort := free[0], free[1], free[2]
	adminAddr := "127.0.0.1:" + strconv.Itoa(peerPort+1)
	env := gitenv.New(t)
	env.NewSSHKey(t, "id_ed25519") // the README's ~/.ssh/id_ed25519.pub

	srvLog, err := os.Create(filepath.Join(t.TempDir(), "rgit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer srvLog.Close()
	srv := exec.Command(filepath.Join(bin, "rgit"), "serve")
	srv.Dir = work
	srv.Env = env.Environ(
		"RGIT_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(httpPort),
		"RGIT_SSH_ADDR=127.0.0.1:"+strconv.Itoa(sshPort),
		"RGIT_PEER_ADDR=127.0.0.1:"+strconv.Itoa(peerPort),
		"RGIT_STORE_URL=", "RGIT_CACHE_DIR=", "RGIT_HOST_KEY=", "RGIT_PEER_SECRET=",
	)
	srv.Stdout, srv.Stderr = srvLog, srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
			<-exited
			t.Errorf("rgit did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			b, _ := os.ReadFile(srvLog.Name())
			t.Logf("rgit output:\n%s", b)
		}
	})
	waitReady(t, "http://127.0.0.1:"+strconv.Itoa(httpPort)+"/ready", exited, &waitErr)

	ports := strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(httpPort),
		"127.0.0.1:2222", "127.0.0.1:"+strconv.Itoa(sshPort))
	extra := []string{
		"RGIT_ADMIN_ADDR=" + adminAddr,
		"GIT_SSH_COMMAND=ssh -i " + filepath.Join(env.Home, ".ssh", "id_ed25519") + " -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + filepath.Join(env.Home, ".ssh", "known_hosts"),
	}
	r := env.Command(work, extra, "bash", "-c", "set -e\n"+ports.Replace(blocks[0]))
	if !r.OK() {
		t.Fatalf("README quick start (HTTP block) failed: %s", r)
	}
	// The SSH block runs in "another shell": a fresh directory (the first
	// block left "hello" in the start directory) whose shell has rgit-admin
	// on PATH and knows the server's cache directory.
	sshDir := t.TempDir()
	extra = append(extra, "PATH="+bin+":"+os.Getenv("PATH"), "RGIT_CACHE_DIR="+filepath.Join(work, "cache"))
	r = env.Command(sshDir, extra, "bash", "-c", "set -e\n"+ports.Replace(blocks[1]))
	if !r.OK() {
		t.Fatalf("README quick start (SSH block) failed: %s", r)
	}

	// The read API examples, as far as they run without the commit ids
	// they elide ("…"), against the quick start's repository, which is
	// private: the block must work for it as written.
	example, err := readAPIExample(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	r = env.Command(sshDir, extra, "bash", "-c", "set -e\n"+ports.Replace(example))
	if !r.OK() || !strings.Contains(r.Stdout, `{"name":"HEAD","oid":"`) || !strings.Contains(r.Stdout, `"name":"refs/heads/main"`) {
		t.Fatalf("README read API example:\n%s\nfailed or did not print alice/hello's refs: %s", example, r)
	}

	// The quick start pushed one commit with README to alice/hello's main,
	// and the SSH clone checked it out.
	sshClone := filepath.Join(sshDir, "hello-ssh")
	got := env.Run(t, sshClone, "log", "-1", "--format=%s", "origin/main")
	if got != "first" {
		t.Fatalf("SSH clone's origin/main is %q, want the quick start's commit", got)
	}
	if b, err := os.ReadFile(filepath.Join(sshClone, "README")); err != nil || string(b) != "hi\n" {
		t.Fatalf("README in the SSH clone: %q, %v", b, err)
	}
}

// quickStartBlocks returns the first two ```sh blocks after "With the server
// running".
func quickStartBlocks(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, "With the server running")
	if !ok {
		return nil, errors.New(`README.md has no "With the server running"`)
	}
	var blocks []string
	for len(blocks) < 2 {
		var found bool
		_, rest, found = strings.Cut(rest, "```sh\n")
		if !found {
			return nil, fmt.Errorf("README.md: found %d ```sh blocks after the quick start heading, want 2", len(blocks))
		}
		var block string
		block, rest, found = strings.Cut(rest, "```")
		if !found {
			return nil, errors.New("README.md: unterminated ```sh block")
		}
		blocks = append(blocks, block)
	}
	return blocks, nil
}

// readAPIExample returns the lines of the read API's example block up to
// the first that elides a commit id ("…").
func readAPIExample(readme string) (string, error) {
	_, rest, ok := strings.Cut(readme, "Examples against `make run`")
	if !ok {
		return "", errors.New("README.md has no read API examples")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		return "", errors.New("README.md: no ```sh block after the read API examples heading")
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if strings.Contains(l, "…") || strings.HasPrefix(l, "```") {
			break
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return "", errors.New("README.md: the read API example block starts with an elided id")
	}
	return strings.Join(lines, "\n"), nil
}

// waitReady polls url until it answers 200, the process exits, or a minute
// passes.
func waitReady(t *testing.T, url string, exited <-chan struct{}, waitErr *error) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("rgit serve exited before it was ready: %v", *waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rgit serve not ready after a minute: %v", err)
		}
	}
}
