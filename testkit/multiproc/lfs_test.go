package multiproc

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/need"
)

// lfsMetric is one series of node n's /metrics (0 if absent).
func lfsMetric(t *testing.T, n *Node, series string) float64 {
	t.Helper()
	v, _ := gitenv.Metric(t, n.MetricsAddr, series)
	return v
}

// TestClusterLFS: Git LFS through nodes that do not own the repository.
// The batch and lock requests are answered by the owner (forwarded, over
// HTTP and from an SSH session's in-process calls), while the transfers
// of the shared file store are served by the node the client reached; a
// clone through a third node reads what the first stored.
func TestClusterLFS(t *testing.T) {
	need.Tool(t, "git-lfs")
	c, env := startCluster(t)
	n0, n1 := c.Nodes[0], c.Nodes[1]
	env.Run(t, "", "lfs", "install", "--skip-repo")
	tok := c.token(t, n0, "alice")
	sshEnv := c.sshKey(t, env, n0, "alice")
	c.mustAdmin(t, n0, "create-repo", "alice/game")

	// Make the repository owned somewhere (a plain push through rgit-1).
	work := env.Scratch(t)
	env.Run(t, work, "lfs", "track", "*.bin")
	env.Commit(t, work, "attributes", nil)
	env.Run(t, work, "push", "-q", n1.HTTPURL(tok, "alice/game"), "main")
	owner := c.waitOwner(t, n0, "alice/game", "")
	others := c.others(owner)
	httpVia, sshVia := others[0], others[1]

	level := make([]byte, 2<<20)
	rand.Read(level)
	if err := os.WriteFile(filepath.Join(work, "level.bin"), level, 0o644); err != nil {
		t.Fatal(err)
	}
	env.Commit(t, work, "level", nil)
	env.Run(t, work, "push", "-q", httpVia.HTTPURL(tok, "alice/game"), "main")
	if n := lfsMetric(t, owner, `rgit_lfs_batch_requests_total{operation="upload",status="200"}`); n == 0 {
		t.Errorf("the owner %s answered no upload batch", owner.Name)
	}
	if n := lfsMetric(t, httpVia, `rgit_lfs_batch_requests_total{operation="upload",status="200"}`); n != 0 {
		t.Errorf("%s answered %v upload batches itself instead of forwarding them", httpVia.Name, n)
	}
	if n := lfsMetric(t, httpVia, `rgit_lfs_node_bytes_total{operation="upload"}`); n != float64(len(level)) {
		t.Errorf("%s stored %v bytes, want the upload's %d", httpVia.Name, n, len(level))
	}

	// Clone over SSH through the other non-owner: its session's batch goes
	// to the owner, the bytes come from its own store.
	clone := filepath.Join(t.TempDir(), "c")
	env.RunEnv(t, "", sshEnv, "clone", "-q", sshVia.SSHURL("alice/game"), clone)
	if got, err := os.ReadFile(filepath.Join(clone, "level.bin")); err != nil || !bytes.Equal(got, level) {
		t.Fatalf("clone via %s: level.bin %d bytes, %v", sshVia.Name, len(got), err)
	}

	// Locks taken through one non-owner are seen through the other.
	lfs := func(dir string, extra []string, args ...string) gitenv.Result {
		return env.TryEnv(dir, extra, append([]string{"lfs"}, args...)...)
	}
	env.Run(t, work, "remote", "add", "origin", httpVia.HTTPURL(tok, "alice/game"))
	if r := lfs(work, nil, "lock", "level.bin"); !r.OK() {
		t.Fatalf("lock via %s: %s", httpVia.Name, r)
	}
	if r := lfs(clone, sshEnv, "locks"); !r.OK() || !strings.Contains(r.Stdout, "level.bin") {
		t.Fatalf("locks via %s over SSH: %s", sshVia.Name, r)
	}
	if n := lfsMetric(t, owner, `rgit_lfs_lock_requests_total{request="create",status="201"}`); n != 1 {
		t.Errorf("the owner %s created %v locks, want 1", owner.Name, n)
	}
	if r := lfs(clone, sshEnv, "unlock", "level.bin"); !r.OK() {
		t.Fatalf("unlock via %s over SSH: %s", sshVia.Name, r)
	}
	for _, n := range others {
		if c.openOn(t, n, "alice/game") {
			t.Errorf("%s opened alice/game: LFS requests were served there, not forwarded", n.Name)
		}
	}
}
