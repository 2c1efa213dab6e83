package serve_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/need"
)

// lfsEnv is a client environment with git-lfs installed in its HOME.
func lfsEnv(t *testing.T) *gitenv.Env {
	t.Helper()
	need.Tool(t, "git-lfs")
	env := gitenv.New(t)
	env.Run(t, "", "lfs", "install", "--skip-repo")
	return env
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func oidOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestLFSSmoke(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := lfsEnv(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/game")
	work := t.TempDir()
	env.Run(t, work, "init", "-q", "-b", "main")
	env.Run(t, work, "lfs", "track", "*.bin")
	big := randomBytes(t, 3<<20)
	os.WriteFile(filepath.Join(work, "big.bin"), big, 0o644)
	env.Commit(t, work, "big", map[string]string{"README": "hi\n"})
	out := env.RunEnv(t, work, []string{"GIT_TRACE=0"}, "push", srv.HTTPURL(tok, "alice/game"), "main")
	t.Log(out)
	clone := filepath.Join(t.TempDir(), "c")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/game"), clone)
	got, err := os.ReadFile(filepath.Join(clone, "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("clone's big.bin: %d bytes, %v", len(got), err)
	}
}
