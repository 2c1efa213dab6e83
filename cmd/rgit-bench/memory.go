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
//
// Before it, one line per phase says which one peaks and with what pages:
//
//	note op=memory fixture=<name> phase=<push|bitmap|clone> vmhwm_mb=<X> rss_anon_mb=<Y> rss_file_mb=<Z> anon_max_mb=<A> file_max_mb=<F> secs=<S>
//
// push is the push until the client returns, bitmap the background build
// of the first pack's bitmap after it (until the bitmap is in the store),
// clone the clone. vmhwm_mb is the phase's own peak (VmHWM is reset at its
// start), rss_anon_mb and rss_file_mb the anonymous and file-backed
// (mapped pack and index pages) parts of the largest sampled VmRSS,
// anon_max_mb and file_max_mb the largest of each seen. With -heapprofile
// the node's heap profile is saved there as <fixture>-<phase>.pb.gz each
// time its RssAnon grows by 16 MB, so the last one is near the peak, and
// as <fixture>-idle.pb.gz after the idle wait.

func runMemory(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("memory", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "large,big")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	idle := fs.Duration("idle", time.Minute, "how long the node is left alone before idle_rss_mb is read")
	heapDir := fs.String("heapprofile", "", "directory for heap profiles taken near each phase's peak (empty: none)")
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
		line, err := hf.benchMemory(ctx, srv, *idle, *heapDir, filepath.Join(work, "store-"+f.Name))
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
func (hf *httpFixture) benchMemory(ctx context.Context, srv *rgitServer, idle time.Duration, heapDir, storeDir string) (string, error) {
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
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	var push, clone sample
	var peakKB int64 // the largest phase VmHWM
	phases := []struct {
		name string
		run  func() error
	}{
		{"push", func() (err error) { push, err = hf.measure(ctx, "http-push", side, 0, 1); return err }},
		{"bitmap", func() error { return waitBitmap(ctx, filepath.Join(storeDir, "objects", benchOwner, "mem", "pack")) }},
		{"clone", func() (err error) { clone, err = hf.measure(ctx, "http-clone", side, 0, 1); return err }},
	}
	for _, ph := range phases {
		w := watchPhase(ctx, srv, pid, hf.Name+"-"+ph.name, heapDir)
		start := time.Now()
		err := ph.run()
		m := w.stop()
		peakKB = max(peakKB, m.hwm)
		if err != nil {
			return "", fmt.Errorf("%s: %w", ph.name, err)
		}
		fmt.Printf("note op=memory fixture=%s phase=%s vmhwm_mb=%.0f rss_anon_mb=%.0f rss_file_mb=%.0f anon_max_mb=%.0f file_max_mb=%.0f secs=%.1f\n",
			hf.Name, ph.name, kbToMB(m.hwm), kbToMB(m.peak.anon), kbToMB(m.peak.file), kbToMB(m.anonMax), kbToMB(m.fileMax), time.Since(start).Seconds())
	}
	// The phases reset the kernel's mark: the node's peak is theirs.
	hwm, anon := max(procHWM(pid), peakKB), procStatusKB(pid, "RssAnon:")
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(idle):
	}
	idleRSS, idleAnon := procStatusKB(pid, "VmRSS:"), procStatusKB(pid, "RssAnon:")
	if heapDir != "" {
		// What the idle node still holds, after a collection.
		if b, err := srv.pprof(ctx, "heap?gc=1"); err == nil {
			os.WriteFile(filepath.Join(heapDir, hf.Name+"-idle.pb.gz"), b, 0o644)
		}
	}
	return fmt.Sprintf("bench op=memory fixture=%s vmhwm_mb=%.0f rss_anon_mb=%.0f idle_rss_mb=%.0f idle_anon_mb=%.0f idle_wait_s=%.0f push_s=%.1f clone_s=%.1f",
		hf.Name, kbToMB(hwm), kbToMB(anon), kbToMB(idleRSS), kbToMB(idleAnon), idle.Seconds(), push.secs, clone.secs), nil
}

func kbToMB(kb int64) float64 { return float64(kb) / 1024 }

// memSample is one reading of a process's resident memory (KB).
type memSample struct{ rss, anon, file int64 }

func readMem(pid string) memSample {
	return memSample{rss: procStatusKB(pid, "VmRSS:"), anon: procStatusKB(pid, "RssAnon:"), file: procStatusKB(pid, "RssFile:")}
}

// phaseMem is what watchPhase saw.
type phaseMem struct {
	hwm              int64     // VmHWM at the end of the phase (reset at its start)
	peak             memSample // the sample with the largest VmRSS
	anonMax, fileMax int64
}

type phaseWatch struct {
	pid  string
	done chan struct{}
	out  chan phaseMem
}

// watchPhase resets the node's VmHWM (clear_refs 5) and samples its
// memory every 20 ms until stop; with heapDir set it saves a heap profile
// as name.pb.gz whenever RssAnon has grown 16 MB past the last profile.
func watchPhase(ctx context.Context, srv *rgitServer, pid, name, heapDir string) *phaseWatch {
	os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0) // best effort: VmHWM then spans the run
	w := &phaseWatch{pid: pid, done: make(chan struct{}), out: make(chan phaseMem, 1)}
	go func() {
		var m phaseMem
		var profiled int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			s := readMem(pid)
			if s.rss > m.peak.rss {
				m.peak = s
			}
			m.anonMax, m.fileMax = max(m.anonMax, s.anon), max(m.fileMax, s.file)
			if heapDir != "" && s.anon > profiled+16<<10 {
				profiled = s.anon
				if b, err := srv.pprof(ctx, "heap"); err == nil {
					os.WriteFile(filepath.Join(heapDir, name+".pb.gz"), b, 0o644)
				}
			}
			select {
			case <-w.done:
				m.hwm = procHWM(pid)
				w.out <- m
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *phaseWatch) stop() phaseMem {
	close(w.done)
	return <-w.out
}

// waitBitmap waits until the first pack's bitmap is in the store
// directory dir (the node builds it in the background after the push).
func waitBitmap(ctx context.Context, dir string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.bitmap")); len(m) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no bitmap in %s after 30 minutes", dir)
}
