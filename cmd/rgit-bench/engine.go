package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	if err := verifyClonePack(ctx, ef, self); err != nil {
		return err
	}
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
	outDir := func(side string, run int) (string, error) {
		d := filepath.Join(ef.work, fmt.Sprintf("index-%s-%d", side, run))
		return d, os.MkdirAll(d, 0o755)
	}

	cacheDir := filepath.Join(ef.work, "clone-cache")
	warm := exec.CommandContext(ctx, self, "engine-child", "clone", "-pack", ef.PackPath, "-idx", ef.IdxPath, "-wants", ef.wantsAll, "-cache", cacheDir, "-bitmap", ef.bitmap)
	if _, err := runTimed(warm); err != nil {
		return fmt.Errorf("warm clone cache: %w", err)
	}

	type sideFn func(run int) (*exec.Cmd, error)
	ops := []struct {
		name      string
		rgit, git sideFn
	}{
		{"index",
			func(run int) (*exec.Cmd, error) {
				d, err := outDir("rgit", run)
				return child("index", run, "-in", ef.fullPack, "-dir", d), err
			},
			func(run int) (*exec.Cmd, error) {
				d, err := outDir("git", run)
				return gitc("", "index-pack", "--threads=2", "-o", filepath.Join(d, "full.idx"), ef.fullPack), err
			}},
		{"clone",
			func(run int) (*exec.Cmd, error) {
				return child("clone", run, "-pack", ef.PackPath, "-idx", ef.IdxPath, "-wants", ef.wantsAll, "-bitmap", ef.bitmap), nil
			},
			func(int) (*exec.Cmd, error) {
				return gitc("", "pack-objects", "--revs", "--stdout", "--all", "--thin", "--delta-base-offset", "--use-bitmap-index", "-q"), nil
			}},
		// The server's clone-pack cache, warmed by an untimed clone before
		// the first run (the op=clone line above is the cold path).
		{"clone-cached",
			func(run int) (*exec.Cmd, error) {
				return child("clone", run, "-pack", ef.PackPath, "-idx", ef.IdxPath, "-wants", ef.wantsAll, "-cache", cacheDir, "-bitmap", ef.bitmap), nil
			},
			func(int) (*exec.Cmd, error) {
				return gitc("", "pack-objects", "--revs", "--stdout", "--all", "--thin", "--delta-base-offset", "--use-bitmap-index", "-q"), nil
			}},
		{"fetch",
			func(run int) (*exec.Cmd, error) {
				return child("fetch", run, "-pack", ef.PackPath, "-idx", ef.IdxPath, "-wants", ef.wantMain, "-haves", ef.haves, "-bitmap", ef.bitmap), nil
			},
			func(int) (*exec.Cmd, error) {
				return gitc(ef.mainTip+"\n^"+ef.behind+"\n", "pack-objects", "--revs", "--stdout", "--thin", "--delta-base-offset", "-q"), nil
			}},
	}
	for _, op := range ops {
		r := result{op: op.name, fixture: ef.Name}
		// Interleave the sides so background noise hits both alike.
		for run := range runs {
			for _, side := range []struct {
				fn  sideFn
				dst *[]sample
			}{{op.rgit, &r.rgit}, {op.git, &r.git}} {
				cmd, err := side.fn(run)
				if err != nil {
					return err
				}
				s, err := runTimed(cmd)
				if err != nil {
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
		r.report(os.Stdout, os.Stderr)
	}
	return nil
}

// verifyClonePack has rgit write its full-clone pack to a file (untimed)
// and checks it with `git index-pack --strict` in an empty repository,
// and that it holds as many objects as git's rev-list says a clone needs.
func verifyClonePack(ctx context.Context, ef *engineFixture, self string) error {
	out := filepath.Join(ef.work, "verify.pack")
	cmd := exec.CommandContext(ctx, self, "engine-child", "clone", "-pack", ef.PackPath, "-idx", ef.IdxPath, "-wants", ef.wantsAll, "-out", out, "-bitmap", ef.bitmap)
	if _, err := runTimed(cmd); err != nil {
		return err
	}
	defer os.Remove(out)
	repo := filepath.Join(ef.work, "verify.git")
	defer os.RemoveAll(repo)
	if _, err := fixture.Git(ctx, ef.work, nil, "init", "-q", "--bare", repo); err != nil {
		return err
	}
	pf, err := os.Open(out)
	if err != nil {
		return err
	}
	defer pf.Close()
	if _, err := fixture.Git(ctx, repo, pf, "index-pack", "--strict", "--stdin"); err != nil {
		return fmt.Errorf("%w: fixture %s: %v", ErrVerify, ef.Name, err)
	}
	want, err := fixture.Git(ctx, ef.Dir, nil, "rev-list", "--objects", "--all")
	if err != nil {
		return err
	}
	got, err := fixture.Git(ctx, repo, nil, "count-objects", "-v")
	if err != nil {
		return err
	}
	nWant := bytes.Count(want, []byte("\n"))
	nGot := countField(string(got), "in-pack")
	if nGot != nWant {
		return fmt.Errorf("%w: fixture %s: clone pack has %d objects, git rev-list --objects --all lists %d", ErrVerify, ef.Name, nGot, nWant)
	}
	fmt.Fprintf(os.Stderr, "  verified fixture=%s clone pack: index-pack --strict ok, %d objects\n", ef.Name, nGot)
	return nil
}

// countField reads "name: N" from git count-objects -v output.
func countField(out, name string) int {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
