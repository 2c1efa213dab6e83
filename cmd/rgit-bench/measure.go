package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sample is one timed run of a process.
type sample struct {
	secs  float64
	rssKB int64 // peak RSS of the process (0 when not measured)
}

// runTimed runs cmd to completion and reports its wall time and peak RSS.
// stdout goes to cmd.Stdout if set (else /dev/null); stderr is kept for
// the error.
func runTimed(cmd *exec.Cmd) (sample, error) {
	var stderr bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	start := time.Now()
	err := cmd.Run()
	s := sample{secs: time.Since(start).Seconds()}
	if err != nil {
		return s, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, lastLines(stderr.Bytes(), 8))
	}
	s.rssKB = reportedHWM(stderr.Bytes())
	return s, nil
}

// The peak RSS of a child is its own VmHWM, not rusage's ru_maxrss: Go
// starts children with CLONE_VM, and Linux carries the parent's high-water
// mark across the child's exec into ru_maxrss, which would charge the
// bench's own memory to rgit. Children print hwmPrefix<KB> on stderr as
// they exit; long-running ones are read from /proc before they stop.
const hwmPrefix = "rgit-bench-vmhwm-kb="

// ownHWM is this process's peak RSS in KB (VmHWM), or 0 if unknown.
func ownHWM() int64 { return procHWM("self") }

// procHWM reads VmHWM (KB) from /proc/<pid>/status; 0 if unavailable.
func procHWM(pid string) int64 { return procStatusKB(pid, "VmHWM:") }

// procStatusKB reads a KB field ("VmRSS:") of /proc/<pid>/status; 0 if
// unavailable.
func procStatusKB(pid, field string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// reportedHWM finds the hwmPrefix line a child printed on stderr.
func reportedHWM(stderr []byte) int64 {
	for _, line := range strings.Split(string(stderr), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), hwmPrefix); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// result is the summary of one measurement over several runs: rgit's
// samples against a reference's, measured interleaved in the same run.
type result struct {
	op, fixture string
	// labels are extra "key=value" fields after fixture (cache=off).
	labels    []string
	rgit, git []sample
	// cmp says what the two sides are; see comparison.
	cmp       comparison
	rgitRSSMB float64 // peak over runs, or of the server process
	gitRSSMB  float64 // 0: not measured
}

// comparison names what a bench line compares, so that no line claims
// more than it measured. The line ends with rgit=<rgit> ref=<ref>; the
// reference's time is printed as <refField>_s (git_s when refField is
// empty). A line with ref=none has no reference: it prints no reference
// time and no ratio (a cache hit, say, is not a ratio against git).
type comparison struct {
	rgit, ref string
	refField  string
}

// Comparisons shared by several benches.
var (
	// Both sides a fresh process per request, start-up included.
	cmpProcess = comparison{rgit: "process", ref: "git-process"}
	// Both sides an HTTP server, every request computed (no answer cache).
	cmpHTTP = comparison{rgit: "http-server", ref: "git-http-backend"}
	// An answer cache's hit: nothing to compare with.
	cmpHit = comparison{rgit: "cache-hit", ref: "none"}
)

func (c comparison) hasRef() bool { return c.ref != "none" }

func (c comparison) field() string {
	if c.refField == "" {
		return "git"
	}
	return c.refField
}

func median(ss []sample) float64 {
	if len(ss) == 0 {
		return 0
	}
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = s.secs
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func peakMB(ss []sample) float64 {
	var m int64
	for _, s := range ss {
		m = max(m, s.rssKB)
	}
	return float64(m) / 1024
}

// line formats the result in the one format the lead's report parses:
//
//	bench op=<op> fixture=<f> [labels] rgit_s=<X> <ref>_s=<Y> ratio=<X/Y> rgit_rss_mb=<M> rgit=<how> ref=<what>
//
// and, without a reference, bench op=… rgit_s=<X> rgit_rss_mb=<M> rgit=<how> ref=none.
func (r result) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench op=%s fixture=%s", r.op, r.fixture)
	for _, l := range r.labels {
		b.WriteString(" " + l)
	}
	rg := median(r.rgit)
	fmt.Fprintf(&b, " rgit_s=%.3f", rg)
	if r.cmp.hasRef() {
		g := median(r.git)
		ratio := 0.0
		if g > 0 {
			ratio = rg / g
		}
		fmt.Fprintf(&b, " %s_s=%.3f ratio=%.2f", r.cmp.field(), g, ratio)
	}
	fmt.Fprintf(&b, " rgit_rss_mb=%.0f rgit=%s ref=%s", r.rgitRSSMB, r.cmp.rgit, r.cmp.ref)
	return b.String()
}

// report prints the result line on stdout and a reference note (git's
// peak RSS, the spread of the runs) on w.
func (r result) report(stdout, notes io.Writer) {
	fmt.Fprintln(stdout, r.line())
	rss := ""
	if r.gitRSSMB > 0 {
		rss = fmt.Sprintf(" git_rss_mb=%.0f", r.gitRSSMB)
	}
	ref := ""
	if r.cmp.hasRef() {
		ref = fmt.Sprintf(" %s_runs=%s", r.cmp.field(), runs(r.git))
	}
	fmt.Fprintf(notes, "  note op=%s fixture=%s%s rgit_runs=%s%s\n", r.op, r.fixture, rss, runs(r.rgit), ref)
}

func runs(ss []sample) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%.4f", s.secs)
	}
	return strings.Join(parts, ",")
}
