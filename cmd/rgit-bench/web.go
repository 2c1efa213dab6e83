package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
)

// The web-page benchmark (make bench-web): each view of rgit's browse
// page against the same view of cgit (Debian's cgit.cgi) on a bare copy
// of the same fixture, or, for the views cgit lacks, against the git
// command that computes the same answer:
//
//	web view=<v> fixture=<f> rgit_p50_ms=<X> cgit_p50_ms=<Y> ratio_p50=<X/Y> rgit_p99_ms=<X> cgit_p99_ms=<Y> ratio_p99=<X/Y> rgit_cpu_ms=<X> cgit_cpu_ms=<Y> ratio_cpu=<X/Y> rgit=server ref=cgit-cgi
//	web view=<v> fixture=<f> rgit_p50_ms=<X> git_p50_ms=<Y> ratio_p50=… rgit=server ref=git-process
//	web view=<v> fixture=<f> skipped reason="…"
//
// Uncached on both sides. rgit is the real binary (`rgit serve`, file
// store) without RGIT_REDIS_URL: it has no other answer cache, so every
// page is computed from the objects (the node keeps its repository, pack
// indexes and object caches open between requests, as a server does).
// cgit runs as a CGI process per request through net/http/cgi in this
// process (how cgit is deployed behind a plain web server), with
// cache-size=0: nothing survives a request but the kernel's page cache,
// which both sides share. Each view is timed -n times per side, one
// request to each in turn (so both see the same load), after -warmup
// untimed requests; p50 and p99 are nearest-rank. The git reference is a
// process per call, start-up included (there is no git server for these
// answers). A view whose rgit URL answers 404 is not on this build and
// prints skipped. Each side's first answer is checked to hold what git
// says the page must (a file name, a commit id, a line), so a bench that
// times an error page fails.

// webView is one page: where it is on rgit, what it is compared with (a
// cgit URL or a git command), and what both answers must contain.
type webView struct {
	name string
	rgit string   // path on the rgit node
	cgit string   // path on the cgit server; "" when git is the reference
	git  []string // git command (in the bare repository) when cgit has no such view
	want []string // strings every answer holds
}

var webViews = []string{"repo", "tree", "file", "commit", "log", "blame", "branches", "search", "file-hl"}

// defaultWebViews leave out file-hl: cgit's highlighting filter starts
// Python and pygments for every request, a second or more each.
var defaultWebViews = webViews[:len(webViews)-1]

// webTarget is what the views of one fixture ask for.
type webTarget struct {
	head, file, dir, branch string
	changed                 string // a path the head commit changes
	parent                  string // the tip's first parent, on every log page
	word                    string // an identifier of file, the search query
}

// webURLs are the views' URLs on both sides: the one place each is
// spelled. rgit's named-ref views (blame, branches, search) answer 404
// until the build has them.
func webURLs(t webTarget, owner, repo string) map[string]webView {
	r := "/" + owner + "/" + repo
	c := "/" + repo
	return map[string]webView{
		"repo":     {rgit: r, cgit: c + "/", want: []string{repo}},
		"tree":     {rgit: r + "/tree/" + t.head + "/" + t.dir, cgit: c + "/tree/" + t.dir + "?id=" + t.head, want: []string{path.Base(t.file)}},
		"file":     {rgit: r + "/blob/" + t.head + "/" + t.file, cgit: c + "/tree/" + t.file + "?id=" + t.head, want: []string{t.word}},
		"file-hl":  {rgit: r + "/blob/" + t.head + "/" + t.file, cgit: c + cgitHighlighted + "/tree/" + t.file + "?id=" + t.head, want: []string{t.word, "<span"}},
		"commit":   {rgit: r + "/commit/" + t.head, cgit: c + "/commit/?id=" + t.head, want: []string{t.changed}},
		"log":      {rgit: r + "/commits/" + t.head, cgit: c + "/log/?id=" + t.head, want: []string{t.head, t.parent}},
		"blame":    {rgit: r + "/blame/" + t.head + "/" + t.file, git: []string{"blame", "--porcelain", t.head, "--", t.file}, want: []string{t.word}},
		"branches": {rgit: r + "/branches", cgit: c + "/refs/heads", want: []string{t.branch}},
		"search":   {rgit: r + "/search?q=" + url.QueryEscape(t.word), git: []string{"grep", "-n", "-I", "-F", t.word, t.head}, want: []string{t.word}},
	}
}

type webFlags struct {
	commonFlags
	rgitBin string
	cgitBin string
	views   string
	n       int
	warmup  int
	profile string
}

func runWeb(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("web", flag.ExitOnError)
	var c webFlags
	c.register(fs, "medium,large")
	fs.StringVar(&c.rgitBin, "rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.StringVar(&c.cgitBin, "cgit", "/usr/lib/cgit/cgit.cgi", "cgit CGI binary (Debian package cgit)")
	fs.StringVar(&c.views, "views", strings.Join(defaultWebViews, ","), "views to measure (of "+strings.Join(webViews, ",")+")")
	fs.IntVar(&c.n, "n", 100, "timed requests per view and side (p50 and p99 are reported)")
	fs.IntVar(&c.warmup, "warmup", 5, "untimed requests per view and side first")
	fs.StringVar(&c.profile, "cpuprofile", "", "directory for a CPU profile of the node per view (<fixture>-<view>.pprof, rgit alone for a few seconds after the view's line; empty: none)")
	fs.Parse(args)
	views := strings.Split(c.views, ",")
	for _, v := range views {
		if !slices.Contains(webViews, v) {
			return fmt.Errorf("-views: unknown %q (want some of %s)", v, strings.Join(webViews, ","))
		}
	}
	if c.n < 1 || c.warmup < 0 {
		return errors.New("-n must be at least 1 and -warmup not negative")
	}
	bin, err := rgitBinary(c.rgitBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.cgitBin); err != nil {
		return fmt.Errorf("cgit: %w (apt-get install cgit, or make deps)", err)
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	work, err := c.workDir("web-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, f := range fxs {
		if err := benchWebOn(ctx, f, c, bin, work, views); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

func benchWebOn(ctx context.Context, f *fixture.Fixture, c webFlags, bin, work string, views []string) error {
	t, err := webTargets(ctx, f)
	if err != nil {
		return err
	}
	env := rgitEnv{bin: bin, storeURL: "file://" + filepath.Join(work, "store-"+f.Name),
		cacheDir: filepath.Join(work, "cache-"+f.Name), hostKey: filepath.Join(work, "host_key")}
	srv, err := startRgit(ctx, env)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := publishFixture(ctx, srv, f); err != nil {
		return err
	}
	cgitBase, stopCgit, err := startCgit(ctx, c.cgitBin, filepath.Join(work, "cgit-"+f.Name), f)
	if err != nil {
		return err
	}
	defer stopCgit()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	urls := webURLs(t, benchOwner, f.Name)
	for _, name := range views {
		v := urls[name]
		v.name = name
		line, err := benchView(ctx, client, "http://"+srv.httpAddr, srv.cmd.Process.Pid, cgitBase, f, v, c.n, c.warmup)
		if err != nil {
			return fmt.Errorf("view %s: %w", name, err)
		}
		fmt.Println(line)
		if c.profile != "" {
			prof := filepath.Join(c.profile, f.Name+"-"+name+".pprof")
			if err := srv.profileFetches(ctx, prof, func() error {
				_, _, err := webGet(ctx, client, "http://"+srv.httpAddr+v.rgit)
				return err
			}); err != nil {
				return fmt.Errorf("view %s: profile: %w", name, err)
			}
		}
	}
	return nil
}

// webTargets picks what the views show: main's tip, the file the API
// bench reads (its directory for the tree), a branch other than main, a
// path the tip changes and the tip's parent. (cgit's log is git log's
// date order over all parents, rgit's first-parent history: both pages
// hold 50 commits, the tip and its parent first.)
func webTargets(ctx context.Context, f *fixture.Fixture) (webTarget, error) {
	at, err := apiTargets(ctx, f)
	if err != nil {
		return webTarget{}, err
	}
	t := webTarget{head: at.head, file: at.blobPath, dir: path.Dir(at.blobPath)}
	if t.word = longestWord(ctx, f, at.files[at.blobPath]); t.word == "" {
		return t, fmt.Errorf("no identifier in %s", t.file)
	}
	out, err := fixture.Git(ctx, f.Dir, nil, "diff-tree", "--no-commit-id", "--name-only", "-r", t.head)
	if err != nil {
		return t, err
	}
	if t.changed, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n"); t.changed == "" {
		return t, fmt.Errorf("main's tip %s changes nothing", t.head)
	}
	if t.dir == "." {
		t.dir = ""
	}
	if t.parent, err = f.Rev(ctx, t.head+"^"); err != nil {
		return t, err
	}
	refs, err := f.Refs(ctx)
	if err != nil {
		return t, err
	}
	for _, r := range refs {
		if b, ok := strings.CutPrefix(r.Name, "refs/heads/"); ok && b != "main" {
			t.branch = b
			break
		}
	}
	if t.branch == "" {
		t.branch = "main"
	}
	return t, nil
}

var identifier = regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]{5,23}\b`)

// longestWord is the longest identifier (up to 24 characters, as people
// search) in blob id, the first of equals: a string no page holds by
// accident and no escaping changes.
func longestWord(ctx context.Context, f *fixture.Fixture, id string) string {
	data, err := fixture.Git(ctx, f.Dir, nil, "cat-file", "blob", id)
	if err != nil {
		return ""
	}
	best := ""
	for _, w := range identifier.FindAllString(string(data), -1) {
		if len(w) > len(best) {
			best = w
		}
	}
	return best
}

// benchView times one view on both sides, interleaved.
func benchView(ctx context.Context, client *http.Client, rgitBase string, rgitPID int, cgitBase string, f *fixture.Fixture, v webView, n, warmup int) (string, error) {
	status, body, err := webGet(ctx, client, rgitBase+v.rgit)
	if err != nil {
		return "", err
	}
	if status == http.StatusNotFound {
		return fmt.Sprintf("web view=%s fixture=%s skipped reason=%q", v.name, f.Name, "rgit answers 404 at "+v.rgit+" (not on this build)"), nil
	}
	if err := webCheck("rgit", v, status, body); err != nil {
		return "", err
	}
	ref := func() (float64, error) {
		start := time.Now()
		st, b, err := webGet(ctx, client, cgitBase+v.cgit)
		ms := msSince(start)
		if err == nil {
			err = webCheck("cgit", v, st, b)
		}
		return ms, err
	}
	refName, refField := "cgit-cgi", "cgit"
	if v.git != nil {
		refName, refField = "git-process", "git"
		ref = func() (float64, error) {
			ms, out, err := gitOnce(ctx, f.Dir, v.git)
			if err == nil {
				err = webCheck("git", v, http.StatusOK, out)
			}
			return ms, err
		}
	}
	var rg, rf []float64
	// CPU time per request on each side, mean over every request of the
	// view: the node's own (it is a child not yet waited for), and the
	// reference processes' (cgit.cgi or git, waited for by this process).
	rgitCPU0, refCPU0 := procCPUTicks(strconv.Itoa(rgitPID)), rusageCPU(syscall.RUSAGE_CHILDREN)
	for i := range warmup + n {
		r, err := ref()
		if err != nil {
			return "", err
		}
		start := time.Now()
		st, body, err := webGet(ctx, client, rgitBase+v.rgit)
		ms := msSince(start)
		if err == nil && i == 0 {
			err = webCheck("rgit", v, st, body)
		}
		if err == nil && st != http.StatusOK {
			err = fmt.Errorf("rgit: GET %s: %d", v.rgit, st)
		}
		if err != nil {
			return "", err
		}
		if i >= warmup {
			rg, rf = append(rg, ms), append(rf, r)
		}
	}
	reqs := float64(warmup + n)
	cpu := [2]float64{float64(procCPUTicks(strconv.Itoa(rgitPID))-rgitCPU0) * 1000 / clockTicks / reqs,
		ms(rusageCPU(syscall.RUSAGE_CHILDREN)-refCPU0) / reqs}
	return webLine(v.name, f.Name, refField, refName, rg, rf, cpu), nil
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100
// on every Linux architecture Go supports).
const clockTicks = 100

// webLine formats one view's result: times in ms (p50, p99) and CPU ms
// per request (cpu: rgit's, the reference's).
func webLine(view, fx, refField, refName string, rg, rf []float64, cpu [2]float64) string {
	slices.Sort(rg)
	slices.Sort(rf)
	r50, r99 := percentile(rg, 50), percentile(rg, 99)
	c50, c99 := percentile(rf, 50), percentile(rf, 99)
	return fmt.Sprintf("web view=%s fixture=%s rgit_p50_ms=%.2f %s_p50_ms=%.2f ratio_p50=%.2f rgit_p99_ms=%.2f %s_p99_ms=%.2f ratio_p99=%.2f rgit_cpu_ms=%.2f %s_cpu_ms=%.2f ratio_cpu=%.2f rgit=server ref=%s",
		view, fx, r50, refField, c50, r50/c50, r99, refField, c99, r99/c99, cpu[0], refField, cpu[1], cpu[0]/cpu[1], refName)
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// webCheck fails an answer that is not a 200 holding every wanted string.
func webCheck(side string, v webView, status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", side, status, lastLines(body, 3))
	}
	for _, w := range v.want {
		if !bytes.Contains(body, []byte(w)) {
			return fmt.Errorf("%s's answer (%d bytes) lacks %q", side, len(body), w)
		}
	}
	return nil
}

// webGet fetches url (never with a validator, so nothing is answered 304)
// and returns its status and body.
func webGet(ctx context.Context, c *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// cgitHighlighted is the suffix of the second name cgit serves the
// repository under, with its syntax-highlighting source filter (Debian's
// filters/syntax-highlighting.py, pygments) on: the file view as rgit's,
// highlighted.
const cgitHighlighted = "-hl"

// startCgit serves cgit.cgi over HTTP on a loopback port, configured for
// one repository, a bare mirror of f at dir/<name>.git, under two names:
// as installed (no source filter), and highlighted (cgitHighlighted);
// cache off. It returns the base URL and a stop function.
func startCgit(ctx context.Context, cgitBin, dir string, f *fixture.Fixture) (string, func(), error) {
	repo := filepath.Join(dir, f.Name+".git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	if _, err := fixture.Git(ctx, dir, nil, "clone", "-q", "--mirror", f.Dir, repo); err != nil {
		return "", nil, fmt.Errorf("bare copy for cgit: %w", err)
	}
	rc := filepath.Join(dir, "cgitrc")
	conf := strings.Join([]string{
		"cache-size=0", // no page cache: every page computed
		"virtual-root=/",
		"max-commit-count=50", // the log page's length, as rgit's
		"enable-http-clone=0",
		"enable-filter-overrides=1", // else repo.source-filter is ignored
		"repo.url=" + f.Name,
		"repo.path=" + repo,
		"repo.url=" + f.Name + cgitHighlighted,
		"repo.path=" + repo,
		"repo.source-filter=" + filepath.Join(filepath.Dir(cgitBin), "filters", "syntax-highlighting.py"),
		"",
	}, "\n")
	if err := os.WriteFile(rc, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	h := &cgi.Handler{Path: cgitBin, Root: "/", Dir: dir,
		Env: []string{"CGIT_CONFIG=" + rc, "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}
