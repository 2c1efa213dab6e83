package node_test

// Git LFS end to end: the real git-lfs client (3.x) against an
// in-process node on the file store and on versitygw, over HTTP and SSH.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/storeurl"
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

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func oidOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// lfsWork is a new work tree that tracks *.bin with Git LFS and commits
// files (name → content) on main.
func lfsWork(t *testing.T, env *gitenv.Env, files map[string][]byte) string {
	t.Helper()
	work := env.Scratch(t)
	env.Run(t, work, "lfs", "track", "*.bin")
	lfsCommit(t, env, work, "first", files)
	return work
}

// lfsCommit writes files in work and commits them (and .gitattributes).
func lfsCommit(t *testing.T, env *gitenv.Env, work, msg string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env.Run(t, work, "add", "-A")
	env.Run(t, work, "commit", "-q", "-m", msg)
}

// sameFile fails the test unless path holds want.
func sameFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes (%v), want the %d bytes pushed", path, len(got), err, len(want))
	}
}

// openStore opens the node's store as a second client of it.
func openStore(t *testing.T, srv *gitenv.Server) objstore.Store {
	t.Helper()
	st, err := storeurl.Open(t.Context(), srv.Store.URL, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lfsKeys lists the store keys of repo's LFS objects.
func lfsKeys(t *testing.T, st objstore.Store, repo string) []string {
	t.Helper()
	var keys []string
	for info, err := range st.List(t.Context(), "objects/"+repo+"/lfs/", "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// metric is the value of one series on the node's /metrics (0 if absent).
func metric(t *testing.T, srv *gitenv.Server, series string) float64 {
	t.Helper()
	v, _ := gitenv.Metric(t, srv.MetricsAddr, series)
	return v
}

// TestLFSPushCloneFetch: git-lfs pushes, clones and fetches over HTTP and
// SSH, on the file store (the node serves the transfers) and on
// versitygw (the client moves the bytes to and from the store with
// presigned URLs: the node moves none of them over HTTP). The objects are
// stored under the repository's own prefix.
func TestLFSPushCloneFetch(t *testing.T) {
	for _, storeName := range []string{"file", "s3"} {
		t.Run(storeName, func(t *testing.T) {
			store := gitenv.FileStore(t)
			if storeName == "s3" {
				store = gitenv.S3Store(t, "lfs")
			}
			srv := gitenv.StartServer(t, store)
			env := lfsEnv(t)
			tok := srv.AddToken(t, "alice")
			key := env.NewSSHKey(t, "alice")
			srv.AddKey(t, "alice", key)
			st := openStore(t, srv)
			for _, tr := range []string{"http", "ssh"} {
				t.Run(tr, func(t *testing.T) {
					repo := "alice/game-" + tr
					srv.CreateRepo(t, repo)
					url, extra := srv.HTTPURL(tok, repo), []string(nil)
					if tr == "ssh" {
						url, extra = srv.SSHURL(repo), gitenv.SSHEnv(key)
					}
					level, art := randomBytes(3<<20+17), randomBytes(200<<10)
					nodeUp := metric(t, srv, `rgit_lfs_node_bytes_total{operation="upload"}`)
					work := lfsWork(t, env, map[string][]byte{"level.bin": level, "art.bin": art, "README": []byte("hi\n")})
					env.RunEnv(t, work, extra, "push", "-q", url, "main")
					want := []string{"objects/" + repo + "/lfs/" + oidOf(art), "objects/" + repo + "/lfs/" + oidOf(level)}
					slices.Sort(want)
					if got := lfsKeys(t, st, repo); !slices.Equal(got, want) {
						t.Fatalf("store holds %v, want %v", got, want)
					}
					if moved := metric(t, srv, `rgit_lfs_node_bytes_total{operation="upload"}`) - nodeUp; storeName == "s3" && tr == "http" && moved != 0 {
						t.Fatalf("the node moved %v bytes of a presigned upload", moved)
					}

					clone := filepath.Join(t.TempDir(), "clone")
					env.RunEnv(t, "", extra, "clone", "-q", url, clone)
					sameFile(t, filepath.Join(clone, "level.bin"), level)
					sameFile(t, filepath.Join(clone, "art.bin"), art)
					if pointer, _ := os.ReadFile(filepath.Join(clone, ".git", "lfs", "objects", oidOf(art)[:2], oidOf(art)[2:4], oidOf(art))); !bytes.Equal(pointer, art) {
						t.Fatal("the clone's LFS store does not hold art.bin")
					}

					more := randomBytes(1 << 20)
					lfsCommit(t, env, work, "more", map[string][]byte{"more.bin": more})
					env.RunEnv(t, work, extra, "push", "-q", url, "main")
					env.RunEnv(t, clone, extra, "fetch", "-q", "origin")
					env.RunEnv(t, clone, extra, "lfs", "fetch", "origin", "main")
					env.RunEnv(t, clone, extra, "merge", "-q", "--ff-only", "origin/main")
					sameFile(t, filepath.Join(clone, "more.bin"), more)
				})
			}
			if storeName == "s3" {
				if n := metric(t, srv, `rgit_lfs_presigned_bytes_total{operation="upload"}`); n == 0 {
					t.Error("no presigned upload bytes counted on S3")
				}
			} else if n := metric(t, srv, `rgit_lfs_node_bytes_total{operation="download"}`); n == 0 {
				t.Error("no node-served download bytes counted on the file store")
			}
			if n := metric(t, srv, `rgit_lfs_batch_requests_total{operation="upload",status="200"}`); n == 0 {
				t.Error("no upload batch counted")
			}
		})
	}
}

// TestLFSPushOverObjectSize: git-lfs pushing a file over
// RGIT_LFS_MAX_OBJECT_SIZE, over HTTP and SSH, fails with the limit's
// message in front of the user; nothing of the push is stored (no LFS
// object, no branch), and a file at the limit goes through.
func TestLFSPushOverObjectSize(t *testing.T) {
	const limit = 64 << 10
	srv := gitenv.StartServer(t, gitenv.FileStore(t), fmt.Sprintf("RGIT_LFS_MAX_OBJECT_SIZE=%d", limit))
	env := lfsEnv(t)
	tok := srv.AddToken(t, "alice")
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	st := openStore(t, srv)
	want := fmt.Sprintf("object too large (limit %d bytes, set RGIT_LFS_MAX_OBJECT_SIZE)", limit)
	for _, tr := range []string{"http", "ssh"} {
		t.Run(tr, func(t *testing.T) {
			repo := "alice/big-" + tr
			srv.CreateRepo(t, repo)
			url, extra := srv.HTTPURL(tok, repo), []string(nil)
			if tr == "ssh" {
				url, extra = srv.SSHURL(repo), gitenv.SSHEnv(key)
			}
			big := randomBytes(limit + 1)
			work := lfsWork(t, env, map[string][]byte{"big.bin": big})
			r := env.TryEnv(work, extra, "push", url, "main")
			if r.OK() || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, oidOf(big)) {
				t.Fatalf("push of %d bytes: want a failure naming the object and %q, got %s", len(big), want, r)
			}
			if keys := lfsKeys(t, st, repo); len(keys) != 0 {
				t.Fatalf("the refused push stored %v", keys)
			}
			if refs := env.RunEnv(t, "", extra, "ls-remote", url); refs != "" {
				t.Fatalf("the refused push created refs: %s", refs)
			}

			// The refused commit replaced by one whose file is at the limit.
			fits := randomBytes(limit)
			if err := os.WriteFile(filepath.Join(work, "big.bin"), fits, 0o644); err != nil {
				t.Fatal(err)
			}
			env.Run(t, work, "commit", "-q", "-a", "--amend", "--no-edit")
			env.RunEnv(t, work, extra, "push", "-q", url, "main")
			if keys := lfsKeys(t, st, repo); !slices.Equal(keys, []string{"objects/" + repo + "/lfs/" + oidOf(fits)}) {
				t.Fatalf("store holds %v, want only the object at the limit", keys)
			}
		})
	}
}
