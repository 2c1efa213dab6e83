package node_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/need"
)

// bigPush pushes ~110 MB of incompressible data in four files, clones it
// back, and logs both timings.
func bigPush(t *testing.T, f *fixture, tr transport) {
	const files, size = 4, 28 << 20
	repo, wt := f.seeded(t, tr, "big", 1)
	rng := rand.New(rand.NewChaCha8([32]byte{'r', 'g', 'i', 't'}))
	buf := make([]byte, size)
	for i := 0; i < files; i++ {
		for j := 0; j < len(buf); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("blob%d.bin", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Random bytes do not compress; level 0 only saves client CPU.
	f.git(t, tr, wt, "-c", "core.compression=0", "add", ".")
	f.git(t, tr, wt, "commit", "-q", "-m", "110 MB of random data")
	head := f.git(t, tr, wt, "rev-parse", "HEAD")

	start := time.Now()
	f.git(t, tr, wt, "-c", "pack.compression=0", "push", "-q", "origin", "HEAD:main")
	push := time.Since(start)
	if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != head {
		t.Fatalf("main = %s after big push, want %s", got, head)
	}

	start = time.Now()
	c := f.clone(t, tr, repo, "--no-checkout")
	clone := time.Since(start)
	if got := f.git(t, tr, c, "rev-parse", "HEAD"); got != head {
		t.Fatalf("clone HEAD %s, want %s", got, head)
	}
	f.env.Fsck(t, c)
	mb := float64(files*size) / (1 << 20)
	t.Logf("big push (%s): %.0f MB pushed in %v (%.1f MB/s), cloned in %v (%.1f MB/s)",
		f.srv.Store.Name, mb, push.Round(time.Millisecond), mb/push.Seconds(), clone.Round(time.Millisecond), mb/clone.Seconds())
}

// interop clones from and pushes to rgit with clients other than git:
// libgit2 (pygit2), dulwich and JGit, over HTTP with a token. A missing
// client skips its subtest loudly (`make deps` installs them).
func interop(t *testing.T, f *fixture) {
	http := f.transports()[0]
	const python = "/usr/bin/python3"
	havePy := func(t *testing.T, module string) {
		t.Helper()
		if r := f.env.Command("", nil, python, "-c", "import "+module); !r.OK() {
			need.Missing(t, "python module "+module, fmt.Sprintf("%s -c 'import %s' failed: %s; run `make deps`", python, module, r.Stderr))
		}
	}
	// Each client clones a seeded repository, commits a file and pushes
	// main; the git client then checks the result.
	verify := func(t *testing.T, repo, head string) {
		t.Helper()
		if got := f.remoteRef(t, http, repo, "refs/heads/main"); got != head {
			t.Fatalf("server main %s, client pushed %s", got, head)
		}
		c := f.clone(t, http, repo)
		if got := f.git(t, http, c, "log", "-1", "--format=%s"); got != "interop commit" {
			t.Fatalf("last commit %q", got)
		}
		f.env.Fsck(t, c)
	}

	t.Run("libgit2", func(t *testing.T) {
		havePy(t, "pygit2")
		repo, _ := f.seeded(t, http, "pygit2", 2)
		dst := filepath.Join(f.dir(t), "c")
		r := f.env.Command("", nil, python, "-c", pygit2Script, f.srv.HTTPURL("", repo), f.aliceToken, dst)
		if !r.OK() {
			t.Fatalf("%s", r)
		}
		verify(t, repo, strings.TrimSpace(r.Stdout))
	})

	t.Run("dulwich", func(t *testing.T) {
		havePy(t, "dulwich")
		repo, _ := f.seeded(t, http, "dulwich", 2)
		dst := filepath.Join(f.dir(t), "c")
		r := f.env.Command("", nil, python, "-c", dulwichScript, f.srv.HTTPURL("", repo), f.aliceToken, dst)
		if !r.OK() {
			t.Fatalf("%s", r)
		}
		verify(t, repo, strings.TrimSpace(lastLine(r.Stdout)))
	})

	t.Run("jgit", func(t *testing.T) {
		need.Tool(t, "jgit")
		// Debian's jgit-cli 4.11 launcher leaves the LFS and Apache HTTP
		// jars off its class path; without them every command fails with
		// NoClassDefFoundError. Its password source chain is ~/.netrc, then
		// an AWT dialog (URL credentials are only a fallback the dialog
		// pre-empts), so it gets a home of its own with a .netrc — git
		// would read that file too.
		jhome := t.TempDir()
		gitconfig, err := os.ReadFile(filepath.Join(f.env.Home, ".gitconfig"))
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := strings.Cut(f.srv.HTTPAddr, ":")
		netrc := fmt.Sprintf("machine %s login x password %s\n", host, f.aliceToken)
		if os.WriteFile(filepath.Join(jhome, ".gitconfig"), gitconfig, 0o644) != nil ||
			os.WriteFile(filepath.Join(jhome, ".netrc"), []byte(netrc), 0o600) != nil {
			t.Fatal("write jgit home")
		}
		jenv := []string{
			"HOME=" + jhome, "NETRC=" + filepath.Join(jhome, ".netrc"),
			"JAVA_TOOL_OPTIONS=-Djava.awt.headless=true -Duser.home=" + jhome,
			"JGIT_CLASSPATH=" + strings.Join([]string{
				"/usr/share/java/org.eclipse.jgit.lfs.jar", "/usr/share/java/org.eclipse.jgit.http.apache.jar",
				"/usr/share/java/httpclient.jar", "/usr/share/java/httpcore.jar",
				"/usr/share/java/gson.jar", "/usr/share/java/commons-logging.jar",
			}, ":"),
		}
		if r := f.env.Command("", jenv, "jgit", "--version"); !r.OK() {
			need.Missing(t, "a working jgit", r.String())
		}
		repo, _ := f.seeded(t, http, "jgit", 2)
		dst := filepath.Join(f.dir(t), "c")
		jgit := func(dir string, args ...string) {
			t.Helper()
			if r := f.env.Command(dir, jenv, "jgit", args...); !r.OK() {
				t.Fatalf("%s", r)
			}
		}
		jgit("", "clone", f.srv.HTTPURL("", repo), dst)
		if err := os.WriteFile(filepath.Join(dst, "jgit.txt"), []byte("from jgit\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		jgit(dst, "add", "jgit.txt")
		jgit(dst, "commit", "-m", "interop commit")
		jgit(dst, "push", "origin", "refs/heads/main")
		verify(t, repo, f.env.Run(t, dst, "rev-parse", "HEAD"))
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// pygit2Script: argv url token dest. Clones with HTTP Basic credentials
// from a callback, commits, pushes main, prints the new commit id.
const pygit2Script = `
import sys, pygit2
url, token, dest = sys.argv[1:4]

class CB(pygit2.RemoteCallbacks):
    def __init__(self):
        super().__init__(credentials=pygit2.UserPass("x", token))
        self.rejected = []
    def push_update_reference(self, refname, message):
        if message:
            self.rejected.append((refname, message))

cb = CB()
repo = pygit2.clone_repository(url, dest, callbacks=cb)
with open(dest + "/libgit2.txt", "w") as f:
    f.write("from libgit2\n")
repo.index.add("libgit2.txt")
repo.index.write()
tree = repo.index.write_tree()
sig = pygit2.Signature("interop", "interop@rgit.invalid")
oid = repo.create_commit("refs/heads/main", sig, sig, "interop commit", tree, [repo.head.target])
repo.remotes["origin"].push(["refs/heads/main:refs/heads/main"], callbacks=cb)
if cb.rejected:
    sys.exit("push rejected: %r" % cb.rejected)
print(oid)
`

// dulwichScript: argv url token dest. Same as pygit2Script with dulwich's
// porcelain.
const dulwichScript = `
import sys, io
from dulwich import porcelain
url, token, dest = sys.argv[1:4]
err = io.BytesIO()
repo = porcelain.clone(url, dest, username="x", password=token, errstream=err)
with open(dest + "/dulwich.txt", "w") as f:
    f.write("from dulwich\n")
porcelain.add(repo, [dest + "/dulwich.txt"])
oid = porcelain.commit(repo, message=b"interop commit", author=b"interop <interop@rgit.invalid>",
                       committer=b"interop <interop@rgit.invalid>")
porcelain.push(repo, url, b"refs/heads/main", username="x", password=token, errstream=err)
print(oid.decode())
`
