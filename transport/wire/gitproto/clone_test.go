package gitproto

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var protocols = []int{0, 1, 2}

// clone clones src through the helper with the given protocol and extra
// arguments, returning the clone's git dir (bare clone) and git's output.
func clone(t *testing.T, proto int, src string, env []string, args ...string) (string, string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "clone.git")
	full := append([]string{"-c", "protocol.version=" + strconv.Itoa(proto), "clone", "--bare", "--upload-pack", helperCmd(t, "upload")}, args...)
	full = append(full, "file://"+src, dst)
	out, err := tryGit(t, "", env, full...)
	if err != nil {
		t.Fatal(err)
	}
	return dst, out
}

func refsOf(t *testing.T, gitDir string) string {
	return runGit(t, "", "--git-dir", gitDir, "for-each-ref", "--format=%(objectname) %(refname)")
}

func TestCloneAllProtocols(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			dst, _ := clone(t, proto, src, nil)
			if got, want := refsOf(t, dst), refsOf(t, src); got != want {
				t.Errorf("refs differ:\n got %s\nwant %s", got, want)
			}
			if head := strings.TrimSpace(runGit(t, "", "--git-dir", dst, "symbolic-ref", "HEAD")); head != "refs/heads/main" {
				t.Errorf("HEAD = %q", head)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--strict", "--no-dangling")
			if n := strings.TrimSpace(runGit(t, "", "--git-dir", dst, "rev-list", "--count", "main")); n != "10" {
				t.Errorf("main has %s commits, want 10", n)
			}
		})
	}
}

func TestLsRemote(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	want := runGit(t, "", "--git-dir", src, "show-ref", "--head", "-d")
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			out := runGit(t, "", "-c", "protocol.version="+strconv.Itoa(proto), "ls-remote", "--upload-pack", helperCmd(t, "upload"), "file://"+src)
			// show-ref prints "<id> <name>", ls-remote "<id>\t<name>".
			if got := strings.ReplaceAll(out, "\t", " "); got != want {
				t.Errorf("ls-remote:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestLsRemoteSymref(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range []int{0, 2} {
		out := runGit(t, "", "-c", "protocol.version="+strconv.Itoa(proto), "ls-remote", "--symref", "--upload-pack", helperCmd(t, "upload"), "file://"+src, "HEAD")
		if !strings.Contains(out, "ref: refs/heads/main\tHEAD") {
			t.Errorf("v%d: no symref in %q", proto, out)
		}
	}
}

func TestCloneEmptyRepo(t *testing.T) {
	t.Parallel()
	src := emptyRepo(t, "refs/heads/trunk")
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			dst, out := clone(t, proto, src, nil)
			if !strings.Contains(out, "empty repository") {
				t.Errorf("git did not report an empty repository: %s", out)
			}
			if refs := refsOf(t, dst); refs != "" {
				t.Errorf("refs in empty clone: %s", refs)
			}
			if proto == 2 {
				// ls-refs unborn tells the client the HEAD target.
				if head := strings.TrimSpace(runGit(t, "", "--git-dir", dst, "symbolic-ref", "HEAD")); head != "refs/heads/trunk" {
					t.Errorf("HEAD = %q, want refs/heads/trunk", head)
				}
			}
		})
	}
}

func TestIncludeTag(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			dst, _ := clone(t, proto, src, nil, "--single-branch", "--branch", "main")
			tags := runGit(t, "", "--git-dir", dst, "tag", "-l")
			for _, want := range []string{"light", "v1", "v2"} {
				if !strings.Contains(tags, want+"\n") {
					t.Errorf("tag %s missing: %q", want, tags)
				}
			}
			if strings.Contains(tags, "vf") {
				t.Errorf("tag vf on feature was sent: %q", tags)
			}
			if got, want := rev(t, dst, "v2"), rev(t, src, "v2"); got != want {
				t.Errorf("v2 = %s, want annotated tag %s", got, want)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--no-dangling")
		})
	}
}

func TestPartialClone(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	runGit(t, "", "--git-dir", src, "config", "uploadpack.allowFilter", "true")
	cases := []struct {
		filter      string
		wantMissing func(n int) bool
		desc        string
	}{
		{"blob:none", func(n int) bool { return n == 10*3+2 }, "all 32 blobs"},
		{"blob:limit=1k", func(n int) bool { return n == 10 }, "the 10 big blobs"},
		{"tree:0", func(n int) bool { return n == 12 }, "the 12 root trees (nothing below them is known)"},
	}
	for _, proto := range []int{0, 2} {
		for _, tc := range cases {
			t.Run("v"+strconv.Itoa(proto)+"/"+tc.filter, func(t *testing.T) {
				dst, _ := clone(t, proto, src, nil, "--filter="+tc.filter, "--no-checkout")
				out := runGit(t, "", "--git-dir", dst, "rev-list", "--objects", "--all", "--missing=print")
				missing := strings.Count(out, "\n?")
				if strings.HasPrefix(out, "?") {
					missing++
				}
				if !tc.wantMissing(missing) {
					t.Errorf("%d missing objects, want %s", missing, tc.desc)
				}
				if n := strings.TrimSpace(runGit(t, "", "--git-dir", dst, "rev-list", "--count", "main")); n != "10" {
					t.Errorf("main has %s commits", n)
				}
			})
		}
	}
}

func readShallow(t *testing.T, gitDir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gitDir, "shallow"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func countCommits(t *testing.T, gitDir, r string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(runGit(t, "", "--git-dir", gitDir, "rev-list", "--count", r)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestShallow(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			p := "protocol.version=" + strconv.Itoa(proto)
			dst, _ := clone(t, proto, src, nil, "--depth", "2", "--branch", "main")
			if got := readShallow(t, dst); len(got) != 1 || got[0] != rev(t, src, "main~1") {
				t.Fatalf("shallow after --depth 2 = %v, want [main~1]", got)
			}
			if n := countCommits(t, dst, "main"); n != 2 {
				t.Fatalf("depth 2 clone has %d commits", n)
			}
			runGit(t, "", "--git-dir", dst, "-c", p, "fetch", "-q", "--upload-pack", helperCmd(t, "upload"), "--deepen", "3", "origin")
			if got := readShallow(t, dst); len(got) != 1 || got[0] != rev(t, src, "main~4") {
				t.Fatalf("shallow after --deepen 3 = %v, want [main~4]", got)
			}
			if n := countCommits(t, dst, "main"); n != 5 {
				t.Fatalf("after deepen: %d commits, want 5", n)
			}
			runGit(t, "", "--git-dir", dst, "-c", p, "fetch", "-q", "--upload-pack", helperCmd(t, "upload"), "--depth", "7", "origin")
			if n := countCommits(t, dst, "main"); n != 7 {
				t.Fatalf("after --depth 7: %d commits, want 7", n)
			}
			runGit(t, "", "--git-dir", dst, "-c", p, "fetch", "-q", "--upload-pack", helperCmd(t, "upload"), "--unshallow", "origin")
			if got := readShallow(t, dst); got != nil {
				t.Fatalf("shallow file after --unshallow: %v", got)
			}
			if n := countCommits(t, dst, "main"); n != 10 {
				t.Fatalf("after unshallow: %d commits", n)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--no-dangling")
		})
	}
}

func TestShallowSinceAndExclude(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			// c8..c10 are at or after day 8.
			dst, _ := clone(t, proto, src, nil, "--shallow-since", strconv.Itoa(fixtureBase+8*86400), "--branch", "main")
			if n := countCommits(t, dst, "main"); n != 3 {
				t.Errorf("--shallow-since: %d commits, want 3", n)
			}
			if got := readShallow(t, dst); len(got) != 1 || got[0] != rev(t, src, "main~2") {
				t.Errorf("--shallow-since boundary %v, want [main~2]", got)
			}
			dst, _ = clone(t, proto, src, nil, "--shallow-exclude", "v1", "--branch", "main")
			if n := countCommits(t, dst, "main"); n != 7 {
				t.Errorf("--shallow-exclude v1: %d commits, want 7", n)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--no-dangling")
		})
	}
}

func TestWantRef(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	dst, _ := clone(t, 2, src, nil, "--single-branch", "--branch", "main")
	out, err := tryGit(t, "", []string{"GIT_TRACE_PACKET=1"}, "--git-dir", dst, "-c", "protocol.version=2",
		"fetch", "--upload-pack", helperCmd(t, "upload"), "origin", "refs/heads/feature:refs/heads/feature")
	if err != nil {
		t.Fatal(err)
	}
	feature := rev(t, src, "feature")
	for _, w := range []string{"fetch> want-ref refs/heads/feature", "fetch< wanted-refs", "fetch< " + feature + " refs/heads/feature"} {
		if !strings.Contains(out, w) {
			t.Errorf("trace lacks %q", w)
		}
	}
	if got := rev(t, dst, "feature"); got != feature {
		t.Errorf("feature = %s, want %s", got, feature)
	}
}
