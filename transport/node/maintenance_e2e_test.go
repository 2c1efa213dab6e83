package node_test

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	reponame "github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/gitenv"
)

// TestManyPacksWithinFileBudget pushes, with real git over HTTP and
// automatic maintenance off, 100 times to one repository (100 packs) on
// a node with RGIT_MAX_OPEN_PACKS=8: a clone of it passes git fsck with
// every commit present, and the node never holds more than 8 pack files
// open, also while the repository's pack set is live.
func TestManyPacksWithinFileBudget(t *testing.T) {
	const pushes, budget = 100, 8
	srv := gitenv.StartServer(t, gitenv.FileStore(t), fmt.Sprint("RGIT_MAX_OPEN_PACKS=", budget),
		"RGIT_MAINTENANCE_SLOTS=0", "RGIT_CLONE_CACHE_BYTES=0")
	token := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/many")
	url := srv.HTTPURL(token, "alice/many")
	env := gitenv.New(t)
	src := env.Scratch(t)
	for i := range pushes {
		env.Commit(t, src, fmt.Sprint("c", i), map[string]string{
			fmt.Sprintf("d%d/f", i%10): strings.Repeat(fmt.Sprintf("push %d\n", i), 50)})
		env.Run(t, src, "push", "-q", url, "main")
		if n := openPackFiles(t); n > budget {
			t.Fatalf("after push %d: %d pack files open, budget %d", i+1, n, budget)
		}
	}
	if n := countPacks(t, srv); n != pushes {
		t.Fatalf("store holds %d packs, want %d (one per push, maintenance off)", n, pushes)
	}
	dst := filepath.Join(t.TempDir(), "clone")
	env.Run(t, "", "clone", "-q", url, dst)
	env.Fsck(t, dst)
	if got, want := env.Run(t, dst, "rev-list", "--count", "HEAD"), fmt.Sprint(pushes); got != want {
		t.Fatalf("clone has %s commits, want %s", got, want)
	}
	if got, want := env.Run(t, dst, "rev-parse", "HEAD"), env.Run(t, src, "rev-parse", "HEAD"); got != want {
		t.Fatalf("clone HEAD %s, want %s", got, want)
	}
	if n := openPackFiles(t); n > budget {
		t.Fatalf("after the clone: %d pack files open, budget %d", n, budget)
	}
	if v := metricValue(t, srv, "rgit_pack_files_open"); v < 1 || v > budget {
		t.Fatalf("rgit_pack_files_open = %v, want 1..%d", v, budget)
	}
}

// metricValue reads one unlabelled metric from the node's /metrics.
func metricValue(t *testing.T, srv *gitenv.Server, name string) float64 {
	t.Helper()
	v, ok := gitenv.Metric(t, srv.MetricsAddr, name)
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	return v
}

// openPackFiles counts this process's descriptors open on cached pack
// files (the node runs in the test process).
func openPackFiles(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, de := range des {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name()))
		if err == nil && strings.Contains(target, "/packs/pack-") && strings.HasSuffix(target, ".pack") {
			n++
		}
	}
	return n
}

// countPacks counts the pack files of the node's file store.
func countPacks(t *testing.T, srv *gitenv.Server) int {
	t.Helper()
	root := strings.TrimPrefix(srv.Store.URL, "file://")
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".pack") && strings.Contains(path, "/objects/") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPushLoopLeavesBoundedPacks pushes, with real git over HTTP and the
// node's default maintenance, 40 times to one repository: once
// maintenance settles the packs are a geometric progression (at most
// log2 of the objects, plus one), and a clone passes git fsck.
func TestPushLoopLeavesBoundedPacks(t *testing.T) {
	const pushes = 40
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	token := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/loop")
	url := srv.HTTPURL(token, "alice/loop")
	env := gitenv.New(t)
	src := env.Scratch(t)
	for i := range pushes {
		env.Commit(t, src, fmt.Sprint("c", i), map[string]string{"f": strings.Repeat(fmt.Sprintf("push %d\n", i), 50)})
		env.Run(t, src, "push", "-q", url, "main")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.WaitMaintenance(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := storeurl.Open(ctx, srv.Store.URL, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	packs, err := repo.ReadPacks(ctx, repo.Deps{Store: store}, reponame.MustParse("alice/loop"))
	if err != nil {
		t.Fatal(err)
	}
	objects := 0
	for _, p := range packs {
		objects += p.Objects
	}
	if limit := bits.Len(uint(objects)) + 1; len(packs) > limit || repo.PlanGeometric(packs, repo.GeometricFactor) != nil {
		t.Fatalf("after %d pushes: %d packs (limit %d, %d objects), want a geometric progression: %+v", pushes, len(packs), limit, objects, packs)
	}
	// Every roll-up went through memory admission.
	if _, metrics := get(t, "http://"+srv.MetricsAddr+"/metrics"); !regexp.MustCompile(`(?m)^rgit_admission_admitted_total\{kind="maintenance"\} [1-9]`).MatchString(metrics) {
		t.Error("no maintenance job admitted against the memory budget in /metrics")
	}
	dst := filepath.Join(t.TempDir(), "clone")
	env.Run(t, "", "clone", "-q", url, dst)
	env.Fsck(t, dst)
	if got, want := env.Run(t, dst, "rev-parse", "HEAD"), env.Run(t, src, "rev-parse", "HEAD"); got != want {
		t.Fatalf("clone HEAD %s, want %s", got, want)
	}
}
