package multiproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/transport/product/admin"
)

// previousRelease is the release the upgrade test rolls from: main as it
// was before versions were made explicit and before the leader-restart
// and consistency work (the merge of the slow-client, read-budget and
// consistency branches follows it), so the test covers every change to
// the peer messages, the ownership map and the stored formats since. Move
// it forward when a release is cut: the promise is about the previous
// release, not every older one.
const previousRelease = "30f0225baac7bc6cd52c9d9e0b48cad213710eb8"

// releaseBin returns the rgit binary of commit, built from this
// repository's history and kept under RGIT_BENCH_DIR (else the user's
// cache directory, else the test's temporary directory): a build takes
// minutes on a busy machine. Without the history (a shallow or exported
// copy) it first asks the clone's origin for it; if that fails too the
// test is skipped loudly (the skip report lists it): the history is
// input, not a tool the harness could install.
func releaseBin(t *testing.T, commit string) string {
	t.Helper()
	root := moduleRoot()
	has := func() ([]byte, error) {
		return exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput()
	}
	if _, err := has(); err != nil {
		_ = exec.Command("git", "-C", root, "fetch", "--quiet", "--unshallow").Run()
	}
	if out, err := has(); err != nil {
		msg := fmt.Sprintf("UPGRADE TEST NOT RUN: release %s is not in the git history at %s (%v: %s); a full clone is needed",
			commit, root, err, strings.TrimSpace(string(out)))
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	dir := t.TempDir()
	cache := os.Getenv("RGIT_BENCH_DIR")
	if cache == "" {
		if uc, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(uc, "rgit")
		}
	}
	if cache != "" {
		dir = filepath.Join(cache, fmt.Sprintf("rgit-release-%s-%s", commit[:12], runtime.Version()))
		if _, err := os.Stat(filepath.Join(dir, "rgit")); err == nil {
			return filepath.Join(dir, "rgit")
		}
	}
	start := time.Now()
	bin, err := BuildRelease(context.Background(), root, commit, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built release %s in %s", commit[:12], time.Since(start).Round(time.Millisecond))
	return bin
}

// TestRollingUpgradeFromPreviousRelease: a fleet of the previous release
// serves a push-and-fetch loop (reads and compare-and-swap pushes of a
// shared branch included) while the rollout gate replaces its nodes one
// at a time, highest ordinal first, with this build: no operation fails,
// nothing acknowledged is lost, and the history is linearizable. Then the
// fleet stops and one node of the previous release starts on the store
// this build has written to since: it serves every repository as this
// build left it (the promise: a downgrade to the previous release reads
// what the new one wrote).
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test: skipped with -short")
	}
	old, cur := releaseBin(t, previousRelease), rgitBin(t)
	c, env := startClusterWith(t, Options{Bin: old})
	fleet := &Fleet{C: c, Bin: cur}
	for i := range c.Nodes {
		wantRelease(t, fleet, i, true)
	}
	l := startLoad(t, c, env, "avail", 2, 4)
	l.progress(t, 10)
	// Before each step the mixed fleet serves operations of its own.
	fleet.BeforeTerm = func(i int) {
		l.progress(t, 6)
		l.lb.TakeOut(c.Nodes[i])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	took, err := admin.Rollout(ctx, fleet, admin.RolloutOptions{Poll: 100 * time.Millisecond, Timeout: 30 * time.Second,
		Progress: func(m string) { t.Logf("%6.2fs rollout: %s", time.Since(start).Seconds(), m) }})
	if err != nil {
		l.finish()
		t.Fatal(err)
	}
	for i := range c.Nodes {
		wantRelease(t, fleet, i, false)
	}
	l.progress(t, 10) // the new fleet writes on its own
	ops := l.finish()
	pushes, acked, fetches, fetched, failed := tally(ops)
	lost := l.checkAcked(t, ops)
	l.checkHistory(t)
	line := fmt.Sprintf("upgrade from=%s rollout_seconds=%.2f pushes=%d acked=%d fetches=%d ok=%d failed=%d lost=%d",
		previousRelease[:12], took.Seconds(), pushes, acked, fetches, fetched, len(failed), lost)
	t.Log(line)
	if len(failed) > 0 {
		t.Errorf("%d operations failed during the upgrade:\n%s", len(failed), strings.Join(failed, "\n"))
	}

	// What this build left, read through it, then through a node of the
	// previous release alone on the same store.
	want := map[string]string{}
	for _, r := range l.repos {
		want[r] = env.Run(t, "", "ls-remote", c.Nodes[0].HTTPURL(l.tok, r))
	}
	for _, n := range c.Nodes {
		if err := n.Term(20 * time.Second); err != nil {
			t.Fatalf("%v\n%s", err, n.LogTail(20))
		}
	}
	n0 := c.Nodes[0]
	n0.SetBin(old)
	if err := n0.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n0.WaitReady(context.Background()); err != nil {
		t.Fatalf("the previous release does not serve the store this build wrote: %v", err)
	}
	wantRelease(t, fleet, 0, true)
	for _, r := range l.repos {
		if got := env.Run(t, "", "ls-remote", n0.HTTPURL(l.tok, r)); got != want[r] {
			t.Errorf("%s through the previous release:\n%s\nthis build left:\n%s", r, got, want[r])
		}
		dir := filepath.Join(t.TempDir(), "clone")
		env.Run(t, "", "clone", "-q", "--mirror", n0.HTTPURL(l.tok, r), dir)
		env.Run(t, dir, "fsck", "--strict")
	}
}

// wantRelease checks that node i runs the previous release (or not).
func wantRelease(t *testing.T, f *Fleet, i int, previous bool) {
	t.Helper()
	st, err := f.Status(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.Version, previousRelease) != previous {
		t.Fatalf("node %d runs %s; previous release (%s) expected: %v", i, st.Version, previousRelease, previous)
	}
}
