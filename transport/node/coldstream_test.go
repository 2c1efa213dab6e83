package node_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node"
)

// coldStreamSetup pushes a repository whose pack spans several ranged
// reads through one node, and starts a second node with an empty cache
// in cacheDir whose store (the same objects) the test can fault.
func coldStreamSetup(t *testing.T, cacheDir string) (env *gitenv.Env, cold *gitenv.Server, fs *faultstore.Store, url, tip, packPrefix string) {
	t.Helper()
	mem := memstore.New()
	st := gitenv.Store{Name: "mem", URL: "mem://"}
	env = gitenv.New(t)
	a := gitenv.StartServerOpts(t, st, []node.Option{node.WithStore(mem)})
	token := a.AddToken(t, "alice")
	a.CreateRepo(t, "alice/stream")
	work := env.Scratch(t)
	// Incompressible: the pack is about 10 MB, three 4 MiB ranged reads.
	blob := make([]byte, 10<<20)
	rand.Read(blob)
	tip = env.Commit(t, work, "big", map[string]string{"big.bin": string(blob), "f.txt": "a"})
	env.Run(t, work, "push", "-q", a.HTTPURL(token, "alice/stream"), "main")
	fs = faultstore.New(mem, 1)
	cold = gitenv.StartServerOpts(t, st, []node.Option{node.WithStore(fs)}, "RGIT_CACHE_DIR="+cacheDir)
	return env, cold, fs, cold.HTTPURL(token, "alice/stream"), tip, "objects/alice/stream/pack/"
}

// cloneReceiving starts `git clone --progress --bare url dst`, returns once
// the client reports receiving objects (failing the test if the clone
// ends first or nothing arrives within streamTimeout), and gives a channel
// that receives the clone's outcome, its stderr beside it.
func cloneReceiving(t *testing.T, env *gitenv.Env, url, dst string) (done <-chan error, stderr *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command("git", "clone", "--progress", "--bare", url, dst)
	cmd.Env = env.Environ()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	recv, fin := make(chan struct{}), make(chan error, 1)
	stderr = &bytes.Buffer{}
	go func() {
		sc := bufio.NewScanner(pipe)
		// Progress lines end in \r until the last.
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
				return i + 1, data[:i], nil
			}
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		})
		seen := false
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if !seen && strings.HasPrefix(sc.Text(), "Receiving objects:") {
				seen = true
				close(recv)
			}
		}
		err := cmd.Wait()
		stderr.WriteString(strings.Join(lines, "\n"))
		fin <- err
	}()
	select {
	case <-recv:
	case err := <-fin:
		t.Fatalf("clone ended (%v) while the pack was held in the store:\n%s", err, stderr)
	case <-time.After(streamTimeout):
		t.Fatalf("the client received no objects in %v while the rest of the pack was held in the store", streamTimeout)
	}
	return fin, stderr
}

// streamTimeout bounds waiting for a clone that should be streaming; it
// only fires when the behaviour under test is missing.
const streamTimeout = 60 * time.Second

// TestColdNodeStreamsPackWhileDownloading: a node with an empty cache
// sends a clone the pack's first objects while the rest of the pack is
// still held in the store, instead of downloading the whole pack first.
func TestColdNodeStreamsPackWhileDownloading(t *testing.T) {
	env, _, fs, url, tip, prefix := coldStreamSetup(t, filepath.Join(t.TempDir(), "cache"))
	// The first chunk comes with the Get that learns the pack's size; every
	// later one waits here.
	gate := fs.HoldKeys(faultstore.OpGetRange, prefix, ".pack")
	defer gate.Release()
	dst := filepath.Join(t.TempDir(), "c.git")
	done, stderr := cloneReceiving(t, env, url, dst)
	if gate.Parked() == 0 {
		t.Fatal("no ranged read of the pack was held: the test did not hold the pack back")
	}
	gate.Release()
	if err := <-done; err != nil {
		t.Fatalf("clone: %v\n%s", err, stderr)
	}
	if got := env.Run(t, dst, "rev-parse", "refs/heads/main"); got != tip {
		t.Fatalf("main = %s, want %s", got, tip)
	}
	env.Fsck(t, dst)
}

// TestColdNodeStreamFailsCleanly: the store breaks while a cold node is
// streaming a pack it is still downloading. The client gets an error (not
// a corrupt repository), the node keeps no partial file, and once the
// store heals the next clone downloads the pack again and succeeds.
func TestColdNodeStreamFailsCleanly(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "cache")
	env, _, fs, url, tip, prefix := coldStreamSetup(t, cacheDir)
	// Rules are decided before a call parks: the held ranged reads break
	// once released, and so do their retries.
	cut := fs.AddRule(faultstore.Rule{Ops: faultstore.OpGetRange, Prefix: prefix, CutBodyAfter: 1000})
	gate := fs.HoldKeys(faultstore.OpGetRange, prefix, ".pack")
	defer gate.Release()
	dst := filepath.Join(t.TempDir(), "c.git")
	done, stderr := cloneReceiving(t, env, url, dst)
	gate.Release()
	if err := <-done; err == nil {
		t.Fatalf("clone succeeded although the store broke mid-pack:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "500") {
		t.Fatalf("client saw a server error:\n%s", stderr)
	}
	t.Logf("the client's error:\n%s", stderr)
	if _, err := os.Stat(dst); err == nil {
		t.Fatalf("a failed clone left %s", dst)
	}
	for _, sub := range []string{"packs", "tmp"} {
		des, err := os.ReadDir(filepath.Join(cacheDir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if strings.HasSuffix(de.Name(), ".pack") || strings.HasPrefix(de.Name(), "dl-") {
				t.Fatalf("partial download kept in the cache: %s/%s", sub, de.Name())
			}
		}
	}
	fs.RemoveRule(cut)
	env.Run(t, t.TempDir(), "clone", "-q", "--bare", url, dst)
	if got := env.Run(t, dst, "rev-parse", "refs/heads/main"); got != tip {
		t.Fatalf("main = %s, want %s", got, tip)
	}
	env.Fsck(t, dst)
}
