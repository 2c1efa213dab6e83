package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/testkit/fixture"
)

// fetchBehind is how many main commits the incremental-fetch client lacks.
const fetchBehind = 10

// ErrVerify: rgit produced a pack that C git rejects.
var ErrVerify = errors.New("rgit pack failed verification")

// engineFixture is what the engine measurements need from one fixture.
type engineFixture struct {
	*fixture.Fixture
	fullPack string
	tips     []string // every ref's id (tags unpeeled, as --all sees them)
	mainTip  string
	behind   string // main~fetchBehind
	work     string // scratch directory for outputs
	wantsAll string // file: one tip per line
	wantMain string
	haves    string
	// bitmap is rgit's reachability bitmap index of the fixture's pack,
	// built untimed before the runs as a repack would build it: every
	// served operation runs with it, as a server holding it would.
	bitmap string
}

func runEngine(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("engine", flag.ExitOnError)
	var c commonFlags
	c.register(fs, strings.Join(fixture.Names, ","))
	profDir := fs.String("cpuprofile", "", "directory for CPU profiles of the rgit child (first run of each measurement)")
	fs.Parse(args)
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for the child process: %w", err)
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return err
		}
	}
	for _, f := range fxs {
		ef, err := prepareEngine(ctx, f)
		if err != nil {
			return err
		}
		err = benchEngineFixture(ctx, ef, self, c.runs, *profDir)
		os.RemoveAll(ef.work)
		if err != nil {
			return err
		}
	}
	return nil
}

func prepareEngine(ctx context.Context, f *fixture.Fixture) (*engineFixture, error) {
	ef := &engineFixture{Fixture: f}
	var err error
	if ef.fullPack, err = f.FullPack(ctx); err != nil {
		return nil, err
	}
	refs, err := f.Refs(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		ef.tips = append(ef.tips, r.ID)
	}
	if ef.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
		return nil, err
	}
	if ef.behind, err = f.Rev(ctx, fmt.Sprintf("refs/heads/main~%d", fetchBehind)); err != nil {
		return nil, err
	}
	if ef.work, err = os.MkdirTemp(filepath.Dir(f.Dir), "engine-work-"); err != nil {
		return nil, err
	}
	write := func(name string, ids ...string) (string, error) {
		p := filepath.Join(ef.work, name)
		return p, os.WriteFile(p, []byte(strings.Join(ids, "\n")+"\n"), 0o644)
	}
	if ef.wantsAll, err = write("wants-all", ef.tips...); err != nil {
		return nil, err
	}
	if ef.wantMain, err = write("wants-main", ef.mainTip); err != nil {
		return nil, err
	}
	if ef.haves, err = write("haves", ef.behind); err != nil {
		return nil, err
	}
	if ef.bitmap, err = buildBitmap(ctx, ef); err != nil {
		return nil, err
	}
	return ef, nil
}

// buildBitmap writes the bitmap index of the fixture's pack for its refs
// into the scratch directory, as the server's repack writes it next to the
// pack, and reports what that cost.
func buildBitmap(ctx context.Context, ef *engineFixture) (string, error) {
	p, err := pack.Open(ef.PackPath, ef.IdxPath)
	if err != nil {
		return "", err
	}
	defer p.Close()
	tips := make([]object.ID, 0, len(ef.tips))
	for _, t := range ef.tips {
		id, err := object.ParseID(t)
		if err != nil {
			return "", fmt.Errorf("fixture %s: ref %q: %w", ef.Name, t, err)
		}
		tips = append(tips, id)
	}
	start := time.Now()
	bm, err := bitmap.Build(ctx, p, tips, bitmap.BuildOptions{})
	if err != nil {
		return "", fmt.Errorf("fixture %s: %w", ef.Name, err)
	}
	took := time.Since(start)
	path := filepath.Join(ef.work, filepath.Base(bitmap.PathFor(ef.PackPath)))
	if err := bm.WriteFile(path); err != nil {
		return "", err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "  bitmap fixture=%s build_s=%.3f masks=%d bytes=%d\n", ef.Name, took.Seconds(), bm.Len(), st.Size())
	return path, nil
}

func benchEngineFixture(ctx context.Context, ef *engineFixture, self string, runs int, profDir string) error {
	child := func(op string, run int, extra ...string) *exec.Cmd {
		args := []string{"engine-child", op}
		if profDir != "" && run == 0 {
			args = append(args, "-cpuprofile", filepath.Join(profDir, fmt.Sprintf("%s-%s.pprof", op, ef.Name)))
		}
		return exec.CommandContext(ctx, self, append(args, extra...)...)
	}
	gitc := func(stdin string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = ef.Dir, fixture.GitEnv()
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		return cmd
	}
	timed := func(cmd *exec.Cmd, err error) (sample, error) {
		if err != nil {
			return sample{}, err
		}
		return runTimed(cmd)
	}
	outDir := func(side string, run int) (string, error) {
		d := filepath.Join(ef.work, fmt.Sprintf("index-%s-%d", side, run))
		return d, os.MkdirAll(d, 0o755)
	}
	// The pack as the server's pack cache holds it: its reverse index
	// sits beside it (written by the first process to open the pack; here
	// the clone server's, before any timed run) and its bitmap.
	packArgs := []string{"-pack", ef.PackPath, "-idx", ef.IdxPath, "-rev", filepath.Join(ef.work, filepath.Base(pack.RevPathFor(ef.PackPath))), "-bitmap", ef.bitmap}
	cloneArgs := append([]string{"clone", "-wants", ef.wantsAll}, packArgs...)
	fetchArgs := append([]string{"fetch", "-wants", ef.wantMain, "-haves", ef.haves}, packArgs...)
	cachedArgs := append(slices.Clone(cloneArgs), "-cache", filepath.Join(ef.work, "clone-cache"))
	gitClone := func(int) (sample, error) {
		return runTimed(gitc("", "pack-objects", "--revs", "--stdout", "--all", "--thin", "--delta-base-offset", "--use-bitmap-index", "-q"))
	}
	gitFetch := func(int) (sample, error) {
		return runTimed(gitc(ef.mainTip+"\n^"+ef.behind+"\n", "pack-objects", "--revs", "--stdout", "--thin", "--delta-base-offset", "--use-bitmap-index", "-q"))
	}

	type sideFn func(run int) (sample, error)
	ops := []struct {
		name string
		cmp  comparison
		// serve, if set, makes the rgit side a warm server started with
		// these child arguments; verify checks its first, untimed answer.
		// cold, if set, is the child a fresh rgit process runs per request;
		// verify checks one untimed run of it.
		serve, cold []string
		verify      func(ctx context.Context, ef *engineFixture, packFile string) error
		rgit        sideFn // index's side
		git         sideFn // nil: no reference (a cache hit)
		// hit: every timed request must be a clone-pack cache hit.
		hit bool
	}{
		{name: "index", cmp: cmpProcess,
			rgit: func(run int) (sample, error) {
				d, err := outDir("rgit", run)
				return timed(child("index", run, "-in", ef.fullPack, "-dir", d), err)
			},
			git: func(run int) (sample, error) {
				d, err := outDir("git", run)
				return timed(gitc("", "index-pack", "--threads=2", "-o", filepath.Join(d, "full.idx"), ef.fullPack), err)
			}},
		// The headline lines: a fresh process per request on both sides.
		{name: "clone", cmp: cmpProcess, cold: cloneArgs, verify: verifyClonePack, git: gitClone},
		{name: "fetch", cmp: cmpProcess, cold: fetchArgs, verify: verifyFetchPack, git: gitFetch},
		// Asymmetric: one request to a running rgit process that has the
		// pack open, against a git process.
		{name: "clone-warm", cmp: cmpWarm, serve: cloneArgs, verify: verifyClonePack, git: gitClone},
		{name: "fetch-warm", cmp: cmpWarm, serve: fetchArgs, verify: verifyFetchPack, git: gitFetch},
		// The clone-pack cache, filled by the server's first request: no
		// reference.
		{name: "clone-cached", cmp: cmpHit, serve: cachedArgs, verify: verifyClonePack, hit: true},
	}
	for _, op := range ops {
		r := result{op: op.name, fixture: ef.Name, cmp: op.cmp}
		rgit := op.rgit
		var srv *warmServer
		switch {
		case op.serve != nil:
			var err error
			if srv, err = startServer(ctx, self, op.serve...); err != nil {
				return err
			}
			err = verifyFirst(ctx, ef, srv, op.verify)
			if err != nil {
				srv.stop()
				return fmt.Errorf("%s %s: %w", op.name, ef.Name, err)
			}
			rgit = func(int) (sample, error) {
				s, hit, err := srv.request("")
				if err == nil && op.hit && !hit {
					err = fmt.Errorf("%w: a clone-pack cache miss after the cache was filled", ErrVerify)
				}
				return s, err
			}
		case op.cold != nil:
			out := filepath.Join(ef.work, "verify.pack")
			err := func() error {
				defer os.Remove(out)
				if _, err := runTimed(child(op.cold[0], 1, append(op.cold[1:], "-out", out)...)); err != nil {
					return err
				}
				return op.verify(ctx, ef, out)
			}()
			if err != nil {
				return fmt.Errorf("%s %s: %w", op.name, ef.Name, err)
			}
			rgit = func(run int) (sample, error) { return runTimed(child(op.cold[0], run, op.cold[1:]...)) }
		}
		sides := []struct {
			fn  sideFn
			dst *[]sample
		}{{rgit, &r.rgit}}
		if op.git != nil {
			sides = append(sides, struct {
				fn  sideFn
				dst *[]sample
			}{op.git, &r.git})
		}
		// Interleave the sides so background noise hits both alike.
		for run := range runs {
			for _, side := range sides {
				s, err := side.fn(run)
				if err != nil {
					if srv != nil {
						srv.stop()
					}
					return fmt.Errorf("%s %s: %w", op.name, ef.Name, err)
				}
				*side.dst = append(*side.dst, s)
			}
			// Index outputs are ~pack sized: drop them between runs.
			for _, side := range []string{"rgit", "git"} {
				os.RemoveAll(filepath.Join(ef.work, fmt.Sprintf("index-%s-%d", side, run)))
			}
		}
		r.rgitRSSMB, r.gitRSSMB = peakMB(r.rgit), peakMB(r.git)
		if srv != nil {
			rss, err := srv.stop()
			if err != nil {
				return fmt.Errorf("%s %s: %w", op.name, ef.Name, err)
			}
			r.rgitRSSMB = float64(rss) / 1024
		}
		r.report(os.Stdout, os.Stderr)
	}
	return nil
}

// cmpWarm: one request to a running rgit process against a git process
// (start-up, pack open and bitmap load included on git's side only).
var cmpWarm = comparison{rgit: "warm-request", ref: "git-process"}

// verifyFirst has a fresh server answer its first request into a file
// (untimed: it is the server's warm-up, whose one-time costs the cold
// lines show) and checks that pack.
func verifyFirst(ctx context.Context, ef *engineFixture, srv *warmServer, verify func(context.Context, *engineFixture, string) error) error {
	out := filepath.Join(ef.work, "verify.pack")
	defer os.Remove(out)
	if _, _, err := srv.request(out); err != nil {
		return err
	}
	return verify(ctx, ef, out)
}

// verifyClonePack checks rgit's full-clone pack with `git index-pack
// --strict` in an empty repository, and that it holds exactly the objects
// git's rev-list says a clone needs.
func verifyClonePack(ctx context.Context, ef *engineFixture, packFile string) error {
	return verifyPack(ctx, ef, packFile, false, "--all")
}

// verifyFetchPack checks rgit's thin fetch pack with `git index-pack
// --strict --fix-thin` in a repository that borrows the fixture's objects
// (as the client has main~fetchBehind), and that it holds at least the
// objects rev-list says the fetch needs: a bitmap plan is exact, a walk
// may resend a few.
func verifyFetchPack(ctx context.Context, ef *engineFixture, packFile string) error {
	return verifyPack(ctx, ef, packFile, true, ef.mainTip, "^"+ef.behind)
}

func verifyPack(ctx context.Context, ef *engineFixture, packFile string, thin bool, revs ...string) error {
	repo := filepath.Join(ef.work, "verify.git")
	defer os.RemoveAll(repo)
	if _, err := fixture.Git(ctx, ef.work, nil, "init", "-q", "--bare", repo); err != nil {
		return err
	}
	args := []string{"index-pack", "--strict", "--stdin"}
	if thin {
		alt := filepath.Join(repo, "objects", "info", "alternates")
		if err := os.WriteFile(alt, []byte(filepath.Join(ef.Dir, "objects")+"\n"), 0o644); err != nil {
			return err
		}
		args = append(args, "--fix-thin")
	}
	pf, err := os.Open(packFile)
	if err != nil {
		return err
	}
	defer pf.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(pf, hdr[:]); err != nil {
		return fmt.Errorf("%w: fixture %s: pack header: %v", ErrVerify, ef.Name, err)
	}
	nGot := int(binary.BigEndian.Uint32(hdr[8:]))
	if _, err := pf.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := fixture.Git(ctx, repo, pf, args...); err != nil {
		return fmt.Errorf("%w: fixture %s: %v", ErrVerify, ef.Name, err)
	}
	want, err := fixture.Git(ctx, ef.Dir, nil, append([]string{"rev-list", "--objects"}, revs...)...)
	if err != nil {
		return err
	}
	nWant := bytes.Count(want, []byte("\n"))
	if nGot < nWant || (!thin && nGot != nWant) {
		return fmt.Errorf("%w: fixture %s: pack has %d objects, git rev-list --objects %s lists %d", ErrVerify, ef.Name, nGot, strings.Join(revs, " "), nWant)
	}
	fmt.Fprintf(os.Stderr, "  verified fixture=%s pack for rev-list %s: index-pack --strict ok, %d objects (rev-list: %d)\n", ef.Name, strings.Join(revs, " "), nGot, nWant)
	return nil
}
