package walk

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchFixture builds (once, cached under the temp dir) a repository that
// imports /usr/local/go/src over 200 commits: 150 commits each add a slice
// of the files, 50 more each modify a handful. The directory survives
// between runs because building it takes a while.
func benchFixture(b *testing.B) *testRepo {
	src := filepath.Join(os.Getenv("GOROOT_FOR_BENCH"), "src")
	if os.Getenv("GOROOT_FOR_BENCH") == "" {
		src = "/usr/local/go/src"
	}
	if _, err := os.Stat(src); err != nil {
		b.Skipf("no source tree at %s", src)
	}
	dir := filepath.Join(os.TempDir(), "rgit-walk-bench-v1")
	r := &testRepo{tb: b, dir: dir, now: fixtureEpoch}
	if _, err := os.Stat(filepath.Join(dir, ".git", "bench-complete")); err == nil {
		return r
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	r.git("init", "-q", "-b", "main")
	var files []string
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(src, p)
			files = append(files, rel)
		}
		return nil
	})
	slices.Sort(files)
	copyFile := func(rel string, suffix string) {
		data, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			b.Fatal(err)
		}
		dst := filepath.Join(dir, "src", rel)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, append(data, suffix...), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	const adds, edits = 150, 50
	for i := 0; i < adds; i++ {
		for _, f := range files[i*len(files)/adds : (i+1)*len(files)/adds] {
			copyFile(f, "")
		}
		r.commit(fmt.Sprintf("add %d", i))
	}
	for i := 0; i < edits; i++ {
		for k := 0; k < 5; k++ {
			copyFile(files[(i*7919+k*104729)%len(files)], fmt.Sprintf("\n// edit %d\n", i))
		}
		r.commit(fmt.Sprintf("edit %d", i))
	}
	r.git("gc", "-q")
	os.WriteFile(filepath.Join(dir, ".git", "bench-complete"), nil, 0o644)
	return r
}

// BenchmarkCloneWalk measures Objects for a full clone of the fixture with
// a warm commit cache, and reports its ratio to `git rev-list --objects
// --all` on the same repository (lower is better).
func BenchmarkCloneWalk(b *testing.B) {
	r := benchFixture(b)
	mr := r.reader()
	g := NewGraph(mr, 0)
	req := Request{Wants: r.revs("main")}
	ctx := context.Background()

	// The CPUs are shared, so compare best-of-N wall times, not means.
	gitTime := time.Duration(1<<63 - 1)
	var out string
	for range 5 {
		start := time.Now()
		out = r.git("rev-list", "--objects", "--all")
		gitTime = min(gitTime, time.Since(start))
	}
	nGit := strings.Count(out, "\n") + 1

	var n int
	best := time.Duration(1<<63 - 1)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := Objects(ctx, g, req)
		if err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(start))
		n = len(res.Objects)
	}
	b.StopTimer()
	if n != nGit {
		b.Fatalf("walk found %d objects, git %d", n, nGit)
	}
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(float64(best.Microseconds())/1000, "best-ms")
	b.ReportMetric(float64(gitTime.Microseconds())/1000, "git-best-ms")
	b.ReportMetric(float64(best)/float64(gitTime), "ratio-to-git")
}

// BenchmarkIncrementalWalk measures a fetch of the last 10 commits.
func BenchmarkIncrementalWalk(b *testing.B) {
	r := benchFixture(b)
	g := NewGraph(r.reader(), 0)
	req := Request{Wants: r.revs("main"), Haves: r.revs("main~10")}
	for b.Loop() {
		if _, err := Objects(context.Background(), g, req); err != nil {
			b.Fatal(err)
		}
	}
}
