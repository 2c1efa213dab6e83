package gitproto

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// addCommit creates a commit on ref in gitDir with one new file and
// returns its id. parent is a revision ("" for the ref's current tip).
func addCommit(t *testing.T, gitDir, ref, parent, name string) string {
	t.Helper()
	return addCommits(t, gitDir, ref, parent, name, 1)
}

// addCommits creates n commits in a row on ref (one fast-import run), each
// adding a file name<i>, and returns the new tip.
func addCommits(t *testing.T, gitDir, ref, parent, name string, n int) string {
	t.Helper()
	if parent == "" {
		parent = ref
	}
	var b strings.Builder
	fmt.Fprintf(&b, "reset %s\nfrom %s\n\n", ref, rev(t, gitDir, parent))
	for i := 0; i < n; i++ {
		file := name
		if n > 1 {
			file += strconv.Itoa(i)
		}
		fmt.Fprintf(&b, "commit %s\ncommitter T <t@example.com> %d +0000\ndata 3\nnew\nM 100644 inline %s\ndata %d\n%s\n\n",
			ref, fixtureBase+(100+i)*86400, file, len(file)+1, file+"\n")
	}
	cmd := exec.Command("git", "--git-dir", gitDir, "fast-import", "--quiet", "--force")
	cmd.Env = gitEnv()
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	return rev(t, gitDir, ref)
}

func TestFetchNegotiation(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			src := newFixture(t)
			dst, _ := clone(t, proto, src, nil)
			oldMain := rev(t, dst, "main")
			// Local-only history makes the client send a first batch of
			// unknown haves and flush, so negotiation takes rounds.
			addCommits(t, dst, "refs/heads/local", "main", "local", 20)
			addCommit(t, src, "refs/heads/main", "", "n1.txt")
			newMain := addCommit(t, src, "refs/heads/main", "", "n2.txt")
			addCommit(t, src, "refs/heads/topic", "main~3", "topic.txt")
			out, err := tryGit(t, "", []string{"GIT_TRACE_PACKET=1"}, "--git-dir", dst,
				"-c", "protocol.version="+strconv.Itoa(proto), "fetch", "--upload-pack", helperCmd(t, "upload"),
				"origin", "+refs/heads/*:refs/heads/*")
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			if proto == 2 {
				wants = []string{"fetch< acknowledgments", "fetch< ACK " + oldMain, "fetch< ready", "fetch< packfile"}
			} else {
				wants = []string{"multi_ack_detailed", "no-done", "fetch< NAK", "fetch< ACK " + oldMain + " common"}
			}
			for _, w := range wants {
				if !strings.Contains(out, w) {
					t.Errorf("trace lacks %q:\n%s", w, out)
				}
			}
			if got := rev(t, dst, "main"); got != newMain {
				t.Errorf("main = %s, want %s", got, newMain)
			}
			if got, want := rev(t, dst, "topic"), rev(t, src, "topic"); got != want {
				t.Errorf("topic = %s, want %s", got, want)
			}
			runGit(t, "", "--git-dir", dst, "fsck", "--no-dangling")
		})
	}
}

// pushArgs builds git push arguments through the helper with protocol proto.
func pushArgs(t *testing.T, proto int, extra ...string) []string {
	return append([]string{"-c", "protocol.version=" + strconv.Itoa(proto), "push", "--receive-pack", helperCmd(t, "receive")}, extra...)
}

func TestPush(t *testing.T) {
	t.Parallel()
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			src := newFixture(t)
			dst, _ := clone(t, proto, src, nil)
			url := "file://" + src
			newMain := addCommit(t, dst, "refs/heads/main", "", "pushed.txt")
			topic := addCommit(t, dst, "refs/heads/topic", "main~5", "topic.txt")

			out := runGit(t, "", append([]string{"--git-dir", dst}, pushArgs(t, proto, "--progress", "-o", "ci.skip", "-o", "reviewer=x y", url, "main", "topic")...)...)
			if !strings.Contains(out, "remote: Receiving objects: 100% (") {
				t.Errorf("no progress from band 2 in:\n%s", out)
			}
			if got := rev(t, src, "main"); got != newMain {
				t.Errorf("src main = %s, want %s", got, newMain)
			}
			if got := rev(t, src, "topic"); got != topic {
				t.Errorf("src topic = %s, want %s", got, topic)
			}
			opts, err := os.ReadFile((&gitRepo{dir: src}).pushLog())
			if err != nil || string(opts) != "ci.skip\nreviewer=x y\n" {
				t.Errorf("push options = %q, %v", opts, err)
			}
			runGit(t, "", "--git-dir", src, "fsck", "--strict", "--no-dangling")

			// Delete a branch (no pack is sent).
			runGit(t, "", append([]string{"--git-dir", dst}, pushArgs(t, proto, url, ":refs/heads/feature")...)...)
			if _, err := tryGit(t, "", nil, "--git-dir", src, "rev-parse", "--verify", "-q", "refs/heads/feature"); err == nil {
				t.Errorf("feature still exists after delete push")
			}

			// Deleting the current branch is refused and changes nothing.
			before := refsOf(t, src)
			out, err = tryGit(t, "", nil, append([]string{"--git-dir", dst}, pushArgs(t, proto, url, ":refs/heads/main")...)...)
			if err == nil || !strings.Contains(out, "[remote rejected] main (deny deleting current branch)") {
				t.Errorf("delete of current branch: err=%v out=%s", err, out)
			}

			// Atomic: one bad command fails all, nothing changes.
			other := addCommit(t, dst, "refs/heads/other", "main", "other.txt")
			out, err = tryGit(t, "", nil, append([]string{"--git-dir", dst}, pushArgs(t, proto, "--atomic", url, ":refs/heads/main", other+":refs/heads/other")...)...)
			if err == nil || !strings.Contains(out, "atomic push failed") || !strings.Contains(out, "deny deleting current branch") {
				t.Errorf("atomic push: err=%v out=%s", err, out)
			}
			if after := refsOf(t, src); after != before {
				t.Errorf("refs changed by rejected pushes:\n%s\nvs\n%s", after, before)
			}

			// Quiet push: no progress lines.
			addCommit(t, dst, "refs/heads/other", "", "other2.txt")
			out = runGit(t, "", append([]string{"--git-dir", dst}, pushArgs(t, proto, "--quiet", url, "other")...)...)
			if strings.Contains(out, "Receiving objects") {
				t.Errorf("quiet push printed progress: %s", out)
			}
			if rev(t, src, "other") != rev(t, dst, "other") {
				t.Errorf("quiet push did not update other")
			}
		})
	}
}

func TestPushToEmptyRepo(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for _, proto := range protocols {
		t.Run("v"+strconv.Itoa(proto), func(t *testing.T) {
			empty := emptyRepo(t, "refs/heads/main")
			runGit(t, "", append([]string{"--git-dir", src}, pushArgs(t, proto, "file://"+empty, "main", "v1")...)...)
			if rev(t, empty, "main") != rev(t, src, "main") || rev(t, empty, "v1") != rev(t, src, "v1") {
				t.Errorf("push to empty repo did not create refs")
			}
			runGit(t, "", "--git-dir", empty, "fsck", "--strict", "--no-dangling")
		})
	}
}
