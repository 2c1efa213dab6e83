package serve_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
)

func TestLFSSmokeTiming(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := lfsEnv(t)
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	srv.CreateRepo(t, "alice/game")
	work := t.TempDir()
	env.Run(t, work, "init", "-q", "-b", "main")
	env.Run(t, work, "lfs", "track", "*.bin")
	os.WriteFile(filepath.Join(work, "big.bin"), randomBytes(t, 1<<20), 0o644)
	env.Commit(t, work, "big", map[string]string{"README": "hi\n"})
	start := time.Now()
	env.RunEnv(t, work, gitenv.SSHEnv(key), "push", "-q", srv.SSHURL("alice/game"), "main")
	t.Log("push", time.Since(start))
	start = time.Now()
	clone := filepath.Join(t.TempDir(), "c")
	r := env.TryEnv("", append(gitenv.SSHEnv(key), "GIT_TRACE=1"), "clone", "-q", srv.SSHURL("alice/game"), clone)
	t.Log("clone", time.Since(start))
	t.Log(r.Stderr)
}
