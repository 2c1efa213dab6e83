// Command rgit-bench compares rgit with C git on deterministic fixture
// repositories (testkit/fixture) and prints one line per measurement:
//
//	bench op=<op> fixture=<name> rgit_s=<X> git_s=<Y> ratio=<X/Y> rgit_rss_mb=<M> rgit=<how rgit ran> ref=<what git_s is>
//
// Every line names both sides of its comparison (measure.go): rgit= says
// how rgit ran, ref= what the reference is, and the two sides are timed
// in turn within the same run. A reference that is not git prints its
// own field (direct_s=, warm_s=); a line with ref=none (a cache hit) has
// no reference time and no ratio.
//
// Subcommands:
//
//	fixtures  build (or find cached) fixtures and print their sizes
//	(the ref-database benchmark is its own command, cmd/rgit-bench-refdb)
//	engine    pack layer: index a pushed pack, full-clone pack, incremental fetch
//	          (fresh processes on both sides, and a warm server, see below)
//	http      end to end over smart HTTP against git http-backend
//	packuris  clones with pack URIs (packfile-uris, from the S3 store)
//	          against clones served whole by the node (see packuris.go)
//	cluster   three nodes: clone through a forwarding node vs. direct to
//	          the owner, and takeover time after kill -9 of the owner
//	maint     pack maintenance: n pushes to one repository, then packs,
//	          open files, RSS and a fetch against a fully packed copy
//	          (its own line format, see maint.go)
//	api       the read API's endpoints against C git plumbing, with and
//	          without the Redis cache (see api.go for its line format)
//	load      many clients at once over many repositories, rgit against
//	          git http-backend (see load.go for its line format)
//	cold      a node with an empty pack cache serves its first clone from a
//	          store with latency and limited bandwidth (see cold.go)
//	cold-open thousands of repositories on one node, more than it keeps
//	          warm, read at random from a store with latency (coldopen.go)
//	outage    the object store hangs (SIGSTOP) or refuses (killed) under
//	          one node for -duration: what clients saw (see outage.go)
//	memory    a node's peak and idle RSS over a push and a clone of the
//	          large and big fixtures (see memory.go for its line format)
//	lfs       Git LFS uploads and downloads through a node against
//	          presigned transfers and cp of the same bytes (see lfs.go)
//	web       the browse page's views against cgit (CGI, cache off) on
//	          the same repository, p50 and p99 (see web.go)
//	soak      three nodes on versitygw under a mixed load for -duration,
//	          one fault a minute: a line a minute and a verdict (soak.go)
//
// The engine's headline lines, op=index, op=clone and op=fetch, are a
// fresh process per request on both sides (rgit=process ref=git-process):
// C git serves a fetch by upload-pack spawning `git pack-objects`
// (bitmaps on), and the rgit child opens the pack, its reverse index
// (read from beside it, as the pack cache keeps it, written by the first
// process) and its bitmap, and answers one request. op=clone-warm and
// op=fetch-warm are asymmetric and labelled so (rgit=warm-request): one
// request to a long-running child (engine-child -serve) that has opened
// the pack once and answered one untimed first request, against the same
// git process; each request gets a fresh commit-graph cache, as engine
// gives each session. op=clone-cached is that server answering from its
// clone-pack cache, every timed request checked to be a hit; it has no
// reference (ref=none). rgit_rss_mb is the child's peak (the server's
// after all requests). The rgit side runs in child processes so that peak
// RSS can be read from rusage. Every clone and fetch pack, the fresh
// process's and the server's, is checked with `git index-pack --strict`
// and against `git rev-list --objects`.
//
// It is a benchmark tool, so it may import anything, testkit included.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/s3local"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "fixtures":
		err = runFixtures(ctx, args)
	case "engine":
		err = runEngine(ctx, args)
	case "engine-child":
		err = runEngineChild(ctx, args)
		fmt.Fprintf(os.Stderr, "%s%d\n", hwmPrefix, ownHWM())
	case "http":
		err = runHTTP(ctx, args)
	case "packuris":
		err = runPackURIs(ctx, args)
	case "cluster":
		err = runCluster(ctx, args)
	case "maint":
		err = runMaint(ctx, args)
	case "api":
		err = runAPI(ctx, args)
	case "load":
		err = runLoad(ctx, args)
	case "cold":
		err = runCold(ctx, args)
	case "cold-open":
		err = runColdOpen(ctx, args)
	case "cold-open-serve":
		err = runColdOpenServe(ctx, args)
	case "outage":
		err = runOutage(ctx, args)
	case "memory":
		err = runMemory(ctx, args)
	case "hostile":
		err = runHostile(ctx, args)
	case "hooks":
		err = runHooks(ctx, args)
	case "lfs":
		err = runLFS(ctx, args)
	case "lfs-floor":
		err = runLFSFloor(args)
	case "web":
		err = runWeb(ctx, args)
	case "soak":
		err = runSoak(ctx, args)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rgit-bench %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rgit-bench fixtures|engine|http|packuris|cluster|maint|api|load|cold|cold-open|outage|memory|hostile|lfs|web|soak [flags]   (-h for flags)")
}

// commonFlags are shared by the subcommands that use fixtures.
type commonFlags struct {
	fixtures string
	dir      string
	runs     int
}

func (c *commonFlags) register(fs *flag.FlagSet, defFixtures string) {
	fs.StringVar(&c.fixtures, "fixtures", defFixtures, "comma-separated fixture sizes ("+strings.Join(fixture.Names, ",")+", big) or repo=<path> of an existing bare repository with one pack and a refs/heads/main")
	fs.StringVar(&c.dir, "dir", fixture.DefaultDir(), "fixture cache directory (default $RGIT_BENCH_DIR or ./bench/fixtures)")
	fs.IntVar(&c.runs, "runs", 3, "repetitions of each measurement (the median is reported)")
}

// rgitBinary resolves a -rgit flag to the absolute path of the rgit
// server binary, which must exist.
func rgitBinary(path string) (string, error) {
	bin, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("rgit binary: %w (run `make build` or pass -rgit)", err)
	}
	return bin, nil
}

// workDir makes a scratch directory beside the fixture cache (the same
// file system, so pushes and clones do not cross devices); the caller
// removes it.
func (c *commonFlags) workDir(prefix string) (string, error) { return scratchDir(c.dir, prefix) }

// startS3 starts versitygw (testkit/s3local) on a data directory under
// work; the caller closes it.
func startS3(work string) (*s3local.Server, error) {
	dir := filepath.Join(work, "s3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s3, err := s3local.StartProcess(dir)
	if err != nil {
		return nil, fmt.Errorf("start versitygw (`make tools` builds it): %w", err)
	}
	return s3, nil
}

// scratchDir makes a new directory named prefix* under dir, creating dir
// if needed, and returns its absolute path (store URLs and child
// processes need one; dir defaults to a relative path); the caller
// removes it.
func scratchDir(dir, prefix string) (string, error) {
	base, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(base, prefix)
}

// build returns the selected fixtures, building missing ones.
func (c *commonFlags) build(ctx context.Context) ([]*fixture.Fixture, error) {
	if c.runs < 1 {
		return nil, errors.New("-runs must be at least 1")
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return nil, err
	}
	var out []*fixture.Fixture
	for _, name := range strings.Split(c.fixtures, ",") {
		if path, ok := strings.CutPrefix(strings.TrimSpace(name), "repo="); ok {
			f, err := fixture.Open(ctx, path)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			continue
		}
		spec, err := fixture.SpecFor(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		f, err := fixture.Build(ctx, spec, dir, os.Stderr)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func runFixtures(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fixtures", flag.ExitOnError)
	var c commonFlags
	c.register(fs, strings.Join(fixture.Names, ","))
	fs.Parse(args)
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	for _, f := range fxs {
		st, err := os.Stat(f.PackPath)
		if err != nil {
			return err
		}
		refs, err := f.Refs(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("fixture name=%s pack_mb=%.1f refs=%d dir=%s\n", f.Name, float64(st.Size())/1e6, len(refs), f.Dir)
	}
	return nil
}
