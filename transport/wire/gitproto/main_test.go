package gitproto

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain doubles as the upload-pack/receive-pack program that the real
// git client runs (--upload-pack / --receive-pack): with RGIT_HELPER set,
// it serves the repository named by its last argument on stdin/stdout.
func TestMain(m *testing.M) {
	if mode := os.Getenv("RGIT_HELPER"); mode != "" {
		os.Exit(helperMain(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

func helperMain(mode, repo string) int {
	b := &gitRepo{dir: repo}
	opt := Options{Protocol: ParseProtocol(os.Getenv("GIT_PROTOCOL")), Agent: "rgit-test/1"}
	ctx := context.Background()
	if os.Getenv("RGIT_HELPER_BUSY") != "" {
		// Every negotiation slot taken, for as long as the helper runs.
		opt.Negotiations = NewSlots(1, 100*time.Millisecond)
		if _, err := opt.Limits.acquire(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var err error
	switch mode {
	case "upload":
		err = UploadPack(ctx, b, os.Stdin, os.Stdout, opt)
	case "receive":
		err = ReceivePack(ctx, b, os.Stdin, os.Stdout, opt)
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rgit helper: %v\n", err)
		return 1
	}
	return 0
}

// helperCmd is the shell command git runs as upload-pack or receive-pack.
func helperCmd(t *testing.T, mode string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return "RGIT_HELPER=" + mode + " " + exe
}

// runGit runs git in dir and fails the test on error.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tryGit(t, dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryGit runs git in dir with extra environment and returns combined
// stdout+stderr.
func tryGit(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// fixture commit layout: main has commits c1..c10 (one day apart from
// fixtureBase), feature branches off c5 with f1, f2. Tags: v1 (annotated,
// c3), v2 (annotated, c8), light (lightweight, c6), vf (annotated, f2).
const fixtureBase = 1600000000

func fixtureStream() string {
	var b strings.Builder
	mark := 1
	blob := func(content string) int {
		fmt.Fprintf(&b, "blob\nmark :%d\ndata %d\n%s\n", mark, len(content), content)
		mark++
		return mark - 1
	}
	commit := func(ref string, ts int, msg string, from int, files map[string]int) int {
		m := mark
		mark++
		fmt.Fprintf(&b, "commit %s\nmark :%d\nauthor T <t@example.com> %d +0000\ncommitter T <t@example.com> %d +0000\ndata %d\n%s\n",
			ref, m, ts, ts, len(msg), msg)
		if from > 0 {
			fmt.Fprintf(&b, "from :%d\n", from)
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			fmt.Fprintf(&b, "M 100644 :%d %s\n", files[name], name)
		}
		b.WriteString("\n")
		return m
	}
	tag := func(name string, to, ts int) {
		fmt.Fprintf(&b, "tag %s\nfrom :%d\ntagger T <t@example.com> %d +0000\ndata %d\n%s\n", name, to, ts, len(name), name)
	}
	var c []int
	prev := 0
	for i := 1; i <= 10; i++ {
		big := strings.Repeat(fmt.Sprintf("big %d ", i), 400) // ~2.8 KB
		files := map[string]int{
			"file.txt":                     blob(fmt.Sprintf("version %d\n", i)),
			fmt.Sprintf("small/%d.txt", i): blob(fmt.Sprintf("small %d\n", i)),
			fmt.Sprintf("big/%d.bin", i):   blob(big),
		}
		prev = commit("refs/heads/main", fixtureBase+i*86400, fmt.Sprintf("c%d", i), prev, files)
		c = append(c, prev)
	}
	f1 := commit("refs/heads/feature", fixtureBase+5*86400+3600, "f1", c[4], map[string]int{"feature.txt": blob("f1\n")})
	f2 := commit("refs/heads/feature", fixtureBase+5*86400+7200, "f2", f1, map[string]int{"feature.txt": blob("f2\n")})
	tag("v1", c[2], fixtureBase+3*86400)
	tag("v2", c[7], fixtureBase+8*86400)
	tag("vf", f2, fixtureBase+6*86400)
	fmt.Fprintf(&b, "reset refs/tags/light\nfrom :%d\n\n", c[5])
	return b.String()
}

// newFixture creates a fresh bare fixture repository and returns its path.
func newFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src.git")
	runGit(t, "", "init", "-q", "--bare", "-b", "main", dir)
	cmd := exec.Command("git", "--git-dir", dir, "fast-import", "--quiet")
	cmd.Env = gitEnv()
	cmd.Stdin = strings.NewReader(fixtureStream())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	return dir
}

// emptyRepo creates an empty bare repository whose HEAD names head.
func emptyRepo(t *testing.T, head string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "empty.git")
	runGit(t, "", "init", "-q", "--bare", dir)
	runGit(t, "", "--git-dir", dir, "symbolic-ref", "HEAD", head)
	return dir
}

// rev resolves a revision in a repository.
func rev(t *testing.T, gitDir, r string) string {
	t.Helper()
	return strings.TrimSpace(runGit(t, "", "--git-dir", gitDir, "rev-parse", r))
}
