// Package outage drives one object-store outage against a running rgit
// node and measures what its clients see: warm repositories read during
// the outage, a push that must fail in seconds naming the store, a cold
// repository that must answer 503 with Retry-After, the health endpoints,
// the store requests the node sent meanwhile, and how long the node takes
// to accept a push once the store is back. The end-to-end test in
// transport/node asserts on its Result; `rgit-bench outage` prints it.
//
// It is test infrastructure: it imports the standard library and
// testkit/gitrun.
package outage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/testkit/gitrun"
)

// Fault starts and ends one kind of outage.
type Fault struct {
	Name       string // "hang", "refuse", … (the Result's case)
	Begin, End func() error
}

// Node is the node under test and its repositories.
type Node struct {
	HTTPAddr    string // public smart-HTTP port (also /healthz, /ready, /status)
	MetricsAddr string // where /metrics is served
	Token       string // a token that may push to Warm and read Cold
	// Warm is pushed to and open on the node, its packs in the node's
	// cache; Cold exists in the store but is not open on the node.
	Warm, Cold string
}

// Options shape a run.
type Options struct {
	Duration time.Duration // how long the store is out
	Git      gitrun.Env
	Work     string // scratch directory (the run makes its own under it)
	// Pace is the pause between two reads during the outage (default
	// 100 ms): load enough to see, modest on a shared machine.
	Pace time.Duration
}

// Result is what one outage looked like from outside.
type Result struct {
	Case string
	// Warm reads (ls-remote, fetch, clone) during the outage.
	Served, Failed int
	FailedOps      []string // the first few failures, for the log
	// The push made as the outage began: how long it took to fail, what
	// git printed about the ref, and whether it was (wrongly) accepted.
	PushFail    time.Duration
	PushMessage string
	PushOK      bool
	// A cold repository's info/refs during the outage.
	ColdStatus     int
	ColdRetryAfter string
	ColdTook       time.Duration
	// Health at the end of the outage.
	HealthzCode int
	ReadyCode   int
	ReadyBody   string
	StatusStore string // /status store.state
	// Store requests the node sent during the outage (every result but
	// failed_fast), and those it failed fast; by result.
	StoreRequests int
	FailedFast    int
	ByResult      map[string]int
	// From the store's return to the first accepted push, and then
	// whether the cold repository clones.
	Recover time.Duration
	ColdOK  bool
	// Pushes acknowledged (before and after the outage) that the node
	// does not show afterwards.
	Lost int
}

// Line is the result as one `rgit-bench outage` line.
func (r Result) Line() string {
	kinds := make([]string, 0, len(r.ByResult))
	for k, n := range r.ByResult {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("outage case=%s served=%d failed=%d push_fail_s=%.2f cold_status=%d cold_s=%.2f healthz=%d ready=%d store=%s store_requests=%d failed_fast=%d by_result=%s recover_s=%.2f lost=%d",
		r.Case, r.Served, r.Failed, r.PushFail.Seconds(), r.ColdStatus, r.ColdTook.Seconds(), r.HealthzCode, r.ReadyCode, r.StatusStore,
		r.StoreRequests, r.FailedFast, strings.Join(kinds, ","), r.Recover.Seconds(), r.Lost)
}

// Run prepares a clone of n.Warm, starts the fault, reads and pushes
// through the outage, ends the fault and measures the recovery.
func Run(ctx context.Context, n Node, f Fault, o Options) (Result, error) {
	if o.Pace <= 0 {
		o.Pace = 100 * time.Millisecond
	}
	res := Result{Case: f.Name}
	work, err := os.MkdirTemp(o.Work, "outage-"+f.Name+"-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	r := &runner{n: n, o: o, work: work, ctx: ctx}
	wt := filepath.Join(work, "w")
	if err := r.git("", "clone", "-q", r.url(n.Warm), wt); err != nil {
		return res, fmt.Errorf("clone %s before the outage: %w", n.Warm, err)
	}
	if _, err := r.commitAndPush(wt, "before"); err != nil {
		return res, fmt.Errorf("push before the outage: %w", err)
	}
	// The push during the outage is made from a second clone, so the
	// reads' fetches do not race its commit.
	pt := filepath.Join(work, "p")
	if err := r.git("", "clone", "-q", r.url(n.Warm), pt); err != nil {
		return res, fmt.Errorf("clone %s before the outage: %w", n.Warm, err)
	}
	before, err := r.metrics()
	if err != nil {
		return res, err
	}
	if err := f.Begin(); err != nil {
		return res, fmt.Errorf("begin %s: %w", f.Name, err)
	}
	began := time.Now()

	// Warm reads all through the outage, beside the probes below.
	readsDone := make(chan struct{})
	stopReads := make(chan struct{})
	go func() {
		defer close(readsDone)
		reads := []func(int) error{
			func(int) error { return r.git("", "ls-remote", r.url(n.Warm)) },
			func(int) error { return r.git(wt, "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*") },
			func(i int) error {
				dir := filepath.Join(work, "c"+strconv.Itoa(i))
				defer os.RemoveAll(dir)
				return r.git("", "clone", "-q", "--bare", r.url(n.Warm), dir)
			},
		}
		for i := 0; ; i++ {
			if err := reads[i%len(reads)](i); err != nil {
				res.Failed++
				if len(res.FailedOps) < 3 {
					res.FailedOps = append(res.FailedOps, err.Error())
				}
			} else {
				res.Served++
			}
			select {
			case <-stopReads:
				return
			case <-time.After(o.Pace):
			}
		}
	}()

	// A push at once, while the node still thinks the store healthy: the
	// case that waits longest.
	tip := r.commit(pt, "during")
	start := time.Now()
	out, perr := r.gitOut(pt, "push", "--porcelain", "origin", "HEAD:main")
	res.PushFail, res.PushOK = time.Since(start), perr == nil
	res.PushMessage = rejectLine(out)

	start = time.Now()
	res.ColdStatus, res.ColdRetryAfter, err = r.infoRefs(n.Cold)
	res.ColdTook = time.Since(start)
	if err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(o.Duration - time.Since(began)):
		}
	}
	close(stopReads)
	<-readsDone
	if err != nil {
		return res, err
	}
	res.HealthzCode, _ = r.get("/healthz")
	res.ReadyCode, res.ReadyBody = r.get("/ready")
	if _, body := r.get("/status"); body != "" {
		var st struct {
			Store struct{ State string } `json:"store"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		res.StatusStore = st.Store.State
	}
	after, err := r.metrics()
	if err != nil {
		return res, err
	}
	res.ByResult = map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			res.ByResult[k] = d
			if k == "failed_fast" {
				res.FailedFast += d
			} else {
				res.StoreRequests += d
			}
		}
	}

	if err := f.End(); err != nil {
		return res, fmt.Errorf("end %s: %w", f.Name, err)
	}
	ended := time.Now()
	// The push again, until it is accepted.
	for {
		out, err := r.gitOut(pt, "push", "--porcelain", "origin", "HEAD:main")
		if err == nil {
			res.Recover = time.Since(ended)
			break
		}
		if time.Since(ended) > 30*time.Second {
			return res, fmt.Errorf("push still failing 30s after the store returned: %v: %s", err, out)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an event
	}
	head, err := r.gitOut("", "ls-remote", r.url(n.Warm), "refs/heads/main")
	if err != nil {
		return res, fmt.Errorf("ls-remote after the outage: %w", err)
	}
	// tip holds every commit acknowledged before it.
	if !strings.HasPrefix(head, tip) {
		res.Lost++
	}
	res.ColdOK = r.git("", "clone", "-q", "--bare", r.url(n.Cold), filepath.Join(work, "cold")) == nil
	return res, nil
}

type runner struct {
	n    Node
	o    Options
	work string
	ctx  context.Context
}

func (r *runner) url(repo string) string {
	return "http://x:" + r.n.Token + "@" + r.n.HTTPAddr + "/" + repo + ".git"
}

func (r *runner) gitOut(dir string, args ...string) (string, error) {
	out, err := r.o.Git.Output(r.ctx, dir, nil, args...)
	return string(out), err
}

func (r *runner) git(dir string, args ...string) error {
	_, err := r.gitOut(dir, args...)
	return err
}

func (r *runner) commit(wt, what string) string {
	name := what + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_ = os.WriteFile(filepath.Join(wt, name), []byte(name+"\n"), 0o644)
	_ = r.git(wt, "add", name)
	_ = r.git(wt, "commit", "-q", "-m", name)
	out, _ := r.gitOut(wt, "rev-parse", "HEAD")
	return strings.TrimSpace(out)
}

func (r *runner) commitAndPush(wt, what string) (string, error) {
	tip := r.commit(wt, what)
	if err := r.git(wt, "push", "-q", "origin", "HEAD:main"); err != nil {
		return "", err
	}
	return tip, nil
}

// rejectLine is the porcelain line of a rejected ref ("!\tHEAD:refs/…\t[remote rejected] (reason)"),
// or the last line of the output.
func rejectLine(out string) string {
	last := ""
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "!") {
			return line
		}
		if line != "" {
			last = line
		}
	}
	return last
}

// infoRefs asks for repo's ref advertisement as a clone would.
func (r *runner) infoRefs(repo string) (int, string, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, "http://"+r.n.HTTPAddr+"/"+repo+".git/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return 0, "", err
	}
	req.SetBasicAuth("x", r.n.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("info/refs of %s: %w", repo, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

func (r *runner) get(path string) (int, string) {
	return getURL(r.ctx, "http://"+r.n.HTTPAddr+path)
}

func getURL(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// metrics sums rgit_store_requests_total by result.
func (r *runner) metrics() (map[string]int, error) {
	code, body := getURL(r.ctx, "http://"+r.n.MetricsAddr+"/metrics")
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d %s", code, body)
	}
	return StoreRequests(body)
}

// StoreRequests sums the rgit_store_requests_total series of a metrics
// page by their result label.
func StoreRequests(page string) (map[string]int, error) {
	const name = "rgit_store_requests_total{"
	by := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			return nil, fmt.Errorf("metrics: malformed line %q", sc.Text())
		}
		_, result, ok := strings.Cut(labels, `result="`)
		if !ok {
			return nil, errors.New("metrics: rgit_store_requests_total without a result label")
		}
		result, _, _ = strings.Cut(result, `"`)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", sc.Text(), err)
		}
		by[result] += int(v)
	}
	return by, sc.Err()
}
