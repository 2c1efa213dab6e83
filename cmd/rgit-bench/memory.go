package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The server's memory on a big history (issue 14): a fresh node takes a
// push of the whole fixture, then serves a clone of it; then it is left
// alone for -idle. One line per fixture:
//
//	bench op=memory fixture=<name> vmhwm_mb=<X> rss_anon_mb=<Y> idle_rss_mb=<Z> idle_anon_mb=<A> idle_wait_s=<W> push_s=<P> clone_s=<C>
//
// vmhwm_mb is the node's peak RSS (VmHWM) over the push and the clone,
// rss_anon_mb its anonymous RSS (RssAnon) when the clone has ended,
// idle_rss_mb and idle_anon_mb its VmRSS and RssAnon after the fixed wait.
// Targets: vmhwm_mb ≤ 256, idle_rss_mb ≤ 100 after 60 s.

func runMemory(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("memory", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "large,big")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	idle := fs.Duration("idle", time.Minute, "how long the node is left alone before idle_rss_mb is read")
	fs.Parse(args)
	c.runs = 1 // one node per fixture: its peak is the measurement
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	work, err := c.workDir("memory-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, f := range fxs {
		hf := &httpFixture{Fixture: f, work: work}
		if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
			return err
		}
		env := rgitEnv{
			bin:      bin,
			storeURL: "file://" + filepath.Join(work, "store-"+f.Name),
			cacheDir: filepath.Join(work, "cache-"+f.Name),
			hostKey:  filepath.Join(work, "host_key"),
		}
		srv, err := startRgit(ctx, env)
		if err != nil {
			return err
		}
		line, err := hf.benchMemory(ctx, srv, *idle)
		if _, serr := srv.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("%s: %w\nrgit log:\n%s", f.Name, err, lastLines(srv.log.Bytes(), 15))
		}
		fmt.Println(line)
	}
	return nil
}

// benchMemory pushes and clones the fixture through srv and returns the
// result line.
func (hf *httpFixture) benchMemory(ctx context.Context, srv *rgitServer, idle time.Duration) (string, error) {
	token, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return "", err
	}
	if _, err := srv.admin(ctx, "create-repo", benchOwner+"/mem"); err != nil {
		return "", err
	}
	side := httpSide{
		cloneURL: srv.url(token, "mem"),
		pushURL:  func(context.Context, int) (string, error) { return srv.url(token, "mem"), nil },
	}
	push, err := hf.measure(ctx, "http-push", side, 0, 1)
	if err != nil {
		return "", err
	}
	clone, err := hf.measure(ctx, "http-clone", side, 0, 1)
	if err != nil {
		return "", err
	}
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	hwm, anon := procHWM(pid), procStatusKB(pid, "RssAnon:")
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(idle):
	}
	idleRSS, idleAnon := procStatusKB(pid, "VmRSS:"), procStatusKB(pid, "RssAnon:")
	return fmt.Sprintf("bench op=memory fixture=%s vmhwm_mb=%.0f rss_anon_mb=%.0f idle_rss_mb=%.0f idle_anon_mb=%.0f idle_wait_s=%.0f push_s=%.1f clone_s=%.1f",
		hf.Name, kbToMB(hwm), kbToMB(anon), kbToMB(idleRSS), kbToMB(idleAnon), idle.Seconds(), push.secs, clone.secs), nil
}

func kbToMB(kb int64) float64 { return float64(kb) / 1024 }
