package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/linearize"
	"github.com/rgit/rgit/testkit/scale"
)

// livenessBound is how long after the chaos healed every repository must
// accept a push: a stale entry lapses within a TTL and its former holder
// hears of it at its next renewal.
const livenessBound = rc.TTL + rc.RenewEvery

// TestRandomized reads and compare-and-swap pushes refs concurrently
// through random nodes while killing, restarting and partitioning nodes
// (the leader included) and replaying nodes' session renewals late (stale
// after a restart), then heals everything and checks liveness (every
// repository accepts a push within livenessBound), that the history of
// every ref is linearizable (package linearize: reads, pushes with their
// old value, the final durable state; checkHistory) and that no two
// nodes ever committed to one
// repository under the same lease epoch. Each seed is
// one run in fake time, and runs the same way every time (see
// TestRandomizedReplay). RGIT_CLUSTER_SEEDS sets the seed count (default
// defaultSeeds: 200, or 50 under -race), RGIT_CLUSTER_FIRST_SEED the first
// (default 0: a sweep split in parts covers seeds the whole would);
// RGIT_CLUSTER_SEED=N runs seed N
// alone and logs its trace (operations, chaos, node logs at debug level).
// A failing seed logs its trace.
func TestRandomized(t *testing.T) {
	if s := os.Getenv("RGIT_CLUSTER_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RGIT_CLUSTER_SEED=%q: %v", s, err)
		}
		synctest.Test(t, func(t *testing.T) { randomRun(t, seed, runOpts{nodeLogs: true, show: true}) })
		return
	}
	seeds := scale.Count(t, "RGIT_CLUSTER_SEEDS", defaultSeeds)
	first := scale.Count(t, "RGIT_CLUSTER_FIRST_SEED", 0)
	start := time.Now()
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRun(t, uint64(seed), runOpts{}) })
		})
	}
	t.Logf("%d seeds in %s (%s a seed)",
		seeds, time.Since(start).Round(time.Millisecond), (time.Since(start) / time.Duration(seeds)).Round(time.Millisecond))
}

// TestRandomizedReplay runs seeds twice, the second time with every CPU
// kept busy by spinning goroutines outside the run (so the scheduler
// preempts and interleaves the run's goroutines differently), and
// requires the two traces, node logs included, to be identical: a seed
// that failed once fails again when replayed with RGIT_CLUSTER_SEED.
// RGIT_CLUSTER_REPLAY_SEEDS sets how many seeds (default 4, from seed 0;
// RGIT_CLUSTER_SEED=N replays seed N alone).
func TestRandomizedReplay(t *testing.T) {
	seeds := []uint64{}
	if s := os.Getenv("RGIT_CLUSTER_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RGIT_CLUSTER_SEED=%q: %v", s, err)
		}
		seeds = append(seeds, seed)
	} else {
		for i := range scale.Count(t, "RGIT_CLUSTER_REPLAY_SEEDS", 4) {
			seeds = append(seeds, uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			var quiet, loaded []string
			synctest.Test(t, func(t *testing.T) { quiet = randomRun(t, seed, runOpts{nodeLogs: true}).canonical() })
			stop := spin()
			synctest.Test(t, func(t *testing.T) { loaded = randomRun(t, seed, runOpts{nodeLogs: true}).canonical() })
			stop()
			if d := firstDiff(quiet, loaded); d != "" {
				a, b := keepTrace(t, seed, "quiet", quiet), keepTrace(t, seed, "loaded", loaded)
				t.Errorf("seed %d ran differently under load (%d and %d trace lines; %s, %s):\n%s", seed, len(quiet), len(loaded), a, b, d)
			}
		})
	}
}

// spin keeps every CPU busy about half the time until the returned
// function is called: the run's goroutines are preempted and
// interleaved differently, without the run taking much longer.
func spin() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for end := time.Now().Add(200 * time.Microsecond); time.Now().Before(end); {
				}
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// keepTrace writes a trace to a file outside the test's temporary
// directory, for diffing after the test, and returns its path.
func keepTrace(t *testing.T, seed uint64, name string, lines []string) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("rgit-cluster-seed-%d-%s.txt", seed, name))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Logf("keep trace: %v", err)
	}
	return path
}

// firstDiff describes where a and b first differ, with context; "" when
// they are equal.
func firstDiff(a, b []string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) && i == len(b) {
		return ""
	}
	from := max(0, i-3)
	var sb strings.Builder
	for j := from; j < i+4; j++ {
		l, r := "", ""
		if j < len(a) {
			l = a[j]
		}
		if j < len(b) {
			r = b[j]
		}
		mark := "  "
		if l != r {
			mark = "≠ "
		}
		fmt.Fprintf(&sb, "%sfirst:  %s\n  second: %s\n", mark, l, r)
	}
	return sb.String()
}

// trace collects a run's events with their fake-time offsets; it is also
// the node logs' sink when a seed is traced.
type trace struct {
	mu    sync.Mutex
	t0    time.Time
	lines []traceLine
}

type traceLine struct {
	at   time.Duration
	text string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	at := time.Since(tr.t0)
	tr.lines = append(tr.lines, traceLine{at, fmt.Sprintf("%13s ", at.Round(time.Microsecond)) + fmt.Sprintf(format, args...)})
}

// Write takes one encoded zap entry.
func (tr *trace) Write(p []byte) (int, error) {
	tr.add("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// canonical is the trace with the lines of each instant sorted: what
// happens at one instant is concurrent (several actors answering one
// message, say) and its log order is the scheduler's.
func (tr *trace) canonical() []string {
	tr.mu.Lock()
	lines := slices.Clone(tr.lines)
	tr.mu.Unlock()
	slices.SortFunc(lines, func(a, b traceLine) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return strings.Compare(a.text, b.text)
	})
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

func (tr *trace) String() string { return strings.Join(tr.canonical(), "\n") }

// Every event the run starts, and every node it starts, has its own phase,
// the offset of its instant within its millisecond: all protocol timings
// are whole milliseconds, so a timer follows the phase of whatever set it,
// and two independent chains of events never wake at the same instant,
// where the Go scheduler would pick their order. Nodes take phases
// 0…nodes-1 µs, worker i's j-th operation workerPhase+(i×ops+j) µs, chaos
// step j chaosPhase+j µs, and liveness attempts from livePhase on.
const (
	workerPhase = 10 * time.Microsecond
	chaosPhase  = 100 * time.Microsecond
	livePhase   = 200 * time.Microsecond
)

// wake sleeps until the first instant at or after at (and now) whose
// offset within its millisecond is phase.
func wake(at time.Time, phase time.Duration) {
	at = later(at, time.Now())
	next := at.Truncate(time.Millisecond).Add(phase % time.Millisecond)
	if next.Before(at) {
		next = next.Add(time.Millisecond)
	}
	time.Sleep(time.Until(next))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// opTimeout is a client's timeout: longer than LeaderWait, and not a
// multiple of it, so that a request's deadline never falls on the instant
// its wait for the leader ends.
const opTimeout = rc.LeaderWait + 10*time.Second + 7*time.Millisecond

// value is a register value in the history: "" for an absent ref.
func value(v uint64, ok bool) string {
	if !ok || v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// storeFault is the randomized run's object store outage (every call
// fails at once), one at a time, for up to 20 s. The leader acknowledges
// session renewals from memory meanwhile (actors/leaderoutage.go): owners
// keep serving warm reads, and kills and restarts of the leader during or
// after it must still never let two nodes serve one repository. A hang
// (a faultstore gate) is not drawn: a call parked at it may hold a lock
// (the map follower's) that another goroutine then waits for, and fake
// time stands still while a goroutine waits on a lock (testing/synctest),
// so the run would never end; testdata/store_hang.txt and the leader's
// unit test cover the hang.
type storeFault struct {
	kind  string
	until time.Time
}

// step ends the fault once it has lasted its time, and starts one at a
// quarter of the chaos steps without one.
func (f *storeFault) step(c *Cluster, tr *trace, rng *rand.Rand) {
	switch {
	case f.kind != "" && !time.Now().Before(f.until):
		f.stop(c, tr)
	case f.kind == "" && rng.IntN(4) == 0:
		f.kind, f.until = "outage", time.Now().Add(time.Duration(2000+rng.IntN(18000))*time.Millisecond)
		tr.add("chaos: store %s until +%s", f.kind, time.Until(f.until).Round(time.Millisecond))
		c.Store.SetOutage(true)
	}
}

// stop ends the fault, if any.
func (f *storeFault) stop(c *Cluster, tr *trace) {
	if f.kind == "" {
		return
	}
	tr.add("chaos: store %s ends", f.kind)
	c.Store.SetOutage(false)
	*f = storeFault{}
}

// checkHistory checks the run's history for linearizability: reads and
// CAS pushes refused as stale (observations) as well as writes and the
// final durable state. Any history that is not
// linearizable fails the test, with the minimal part that is not; a
// previous owner serving a read after the repository moved is one
// (cluster.ServeLease and cluster.ForceAt exclude it).
func checkHistory(t *testing.T, seed uint64, ops []linearize.Op) {
	res := linearize.Check(ops, t.TempDir(), time.Minute)
	switch {
	case res.OK:
	case res.Timeout:
		t.Logf("seed %d: linearizability check gave up on %s", seed, res.Key)
	default:
		t.Errorf("seed %d: history not linearizable:\n%s\nvisualization: %s", seed, res.Excerpt, res.Visualization)
	}
}

// runOpts say what a run's trace holds and when it is logged.
type runOpts struct {
	nodeLogs bool // the nodes' logs, at debug level, besides operations and chaos
	show     bool // log the trace even if the run passes
}

// randomRun runs one seed and returns its trace (logged if the run fails).
func randomRun(t *testing.T, seed uint64, ro runOpts) *trace {
	const (
		nodes   = 3
		repos   = 4
		refs    = 2 // shared refs per repository, read and CAS-pushed by every worker
		workers = 4
		ops     = 15
		chaos   = 12
	)
	tr := &trace{t0: time.Now()}
	opts := Options{Nodes: nodes, Seed: int64(seed), WarmTTL: 4 * time.Second, Stagger: time.Microsecond}
	if ro.nodeLogs {
		enc := zap.NewDevelopmentEncoderConfig()
		enc.TimeKey = "" // the trace prints fake-time offsets
		opts.Log = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(tr), zap.DebugLevel))
	}
	defer func() {
		if ro.show || t.Failed() {
			t.Logf("seed %d trace:\n%s", seed, tr)
		}
	}()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer settle()
	defer c.Close()
	ctx := context.Background()
	repoNames := make([]string, repos)
	for i := range repoNames {
		repoNames[i] = fmt.Sprintf("alice/r%d", i)
		if err := repo.Create(ctx, c.Deps(), names.MustParse(repoNames[i])); err != nil {
			t.Fatal(err)
		}
	}
	var store storeFault // read by restart, changed by the chaos goroutine alone
	restart := func(name string) {
		i := slices.Index(c.Names(), name)
		wake(time.Now(), time.Duration(i)*time.Microsecond)
		tr.add("chaos: restart %s", name)
		switch err := c.Restart(name); {
		case err != nil && store.kind != "":
			// A node cannot start without the store (a pod would be
			// restarted until it can); it stays down.
			tr.add("chaos: restart %s failed, the store down: %v", name, err)
		case err != nil:
			t.Errorf("restart %s: %v", name, err)
		}
	}

	var hist linearize.History
	var mu sync.Mutex
	attempts, failed := 0, 0
	count := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if err != nil {
			failed++
		}
	}
	// cas pushes ref=v to r through entry if it is at old, and records it.
	cas := func(client int, entry, r, ref string, old, v uint64) error {
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		call := time.Now()
		res, err := c.CAS(rctx, entry, r, ref, old, v)
		ret := time.Now()
		cancel()
		count(err)
		op := linearize.Op{Client: client, Key: r + " " + ref, Kind: linearize.CAS, Old: value(old, true), New: value(v, true),
			Call: call, Return: ret, Note: "via " + entry}
		switch {
		case err == nil:
			tr.add("push %s %s %d→%d via %s: ok at %s epoch %d", r, ref, old, v, entry, res.Node, res.Epoch)
			op.Outcome = linearize.OK
		case res.Stale:
			tr.add("push %s %s %d→%d via %s: stale at %s", r, ref, old, v, entry, res.Node)
			op.Outcome = linearize.Rejected
		default:
			tr.add("push %s %s %d→%d via %s: %v", r, ref, old, v, entry, err)
			if !res.Sent {
				return err // it never reached the repository
			}
			op.Outcome, op.Note = linearize.Unknown, op.Note+": "+err.Error()
		}
		hist.Add(op)
		return err
	}
	read := func(client int, entry, r, ref string) (uint64, error) {
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		call := time.Now()
		node, v, ok, err := c.Get(rctx, entry, r, ref)
		ret := time.Now()
		cancel()
		count(err)
		if err != nil {
			tr.add("read %s %s via %s: %v", r, ref, entry, err)
			return 0, err
		}
		tr.add("read %s %s via %s: %d at %s", r, ref, entry, v, node)
		hist.Add(linearize.Op{Client: client, Key: r + " " + ref, Kind: linearize.Read, Value: value(v, ok), Call: call, Return: ret, Note: "via " + entry})
		return v, nil
	}

	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		wg.Go(func() {
			// What this worker last saw of each register: the old value
			// of its next push there.
			seen := map[string]uint64{}
			next := time.Now()
			for i := range ops {
				next = next.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
				wake(next, workerPhase+time.Duration(w*ops+i)*time.Microsecond)
				entry := c.Names()[rng.IntN(nodes)]
				r := repoNames[rng.IntN(repos)]
				ref := fmt.Sprintf("refs/heads/b%d", rng.IntN(refs))
				k := r + " " + ref
				if rng.IntN(3) == 0 {
					if v, err := read(w, entry, r, ref); err == nil {
						seen[k] = v
					}
					continue
				}
				v := uint64(w*1000 + i + 1)
				if cas(w, entry, r, ref, seen[k], v) == nil {
					seen[k] = v
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	// Late renewals and store faults draw from their own streams, so the
	// chaos below stays what each seed always did.
	late := rand.New(rand.NewPCG(seed, 1<<32))
	storeFaults := rand.New(rand.NewPCG(seed, 2<<32))
	wg.Go(func() {
		next := time.Now()
		for j := range chaos {
			store.step(c, tr, storeFaults)
			next = next.Add(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
			if late.IntN(3) == 0 {
				name := c.Names()[late.IntN(nodes)]
				m, r, ok, err := c.ReplayRenewal(ctx, name)
				if ok {
					tr.add("chaos: late renewal of %s session %d: %+v %v", name, m.Session, r, err)
				}
			}
			wake(next, chaosPhase+time.Duration(j)*time.Microsecond)
			name := c.Names()[rng.IntN(nodes)]
			switch op := rng.IntN(4); {
			case op == 0 && c.Node(name) != nil:
				tr.add("chaos: kill %s", name)
				switch err := c.Kill(name); {
				case err != nil && store.kind != "":
					// A repository busy on the store does not close in
					// time; the node is down all the same.
					tr.add("chaos: kill %s: %v", name, err)
				case err != nil:
					t.Errorf("kill %s: %v", name, err)
				}
			case op <= 1 && c.Node(name) == nil:
				restart(name)
			case op == 2:
				tr.add("chaos: partition %s", name)
				c.Net.Partition(name, true)
			default:
				tr.add("chaos: heal %s", name)
				c.Net.Partition(name, false)
			}
		}
		// Bring everything back, for the liveness check and the final reads.
		tr.add("chaos: heal all, restart every killed node")
		store.stop(c, tr)
		c.Net.HealAll()
		for _, name := range c.Names() {
			if c.Node(name) == nil {
				restart(name)
			}
		}
		// Liveness: with the cluster whole again no repository or node may
		// stay in a state it never leaves, so every repository accepts a
		// push entered at every node within livenessBound, while the
		// workers may still be pushing. The chaos itself may refuse every
		// push (the leader dead before the first claim and back only
		// here: testdata/leader_down_cold.txt), so liveness is asserted
		// from the heal on, not as "some push was acknowledged".
		healed := time.Now()
		for e, entry := range c.Names() {
			for ri, r := range repoNames {
				client := workers + e*repos + ri
				wg.Go(func() {
					for attempt := 0; ; attempt++ {
						wake(time.Now(), livePhase+time.Duration(client-workers+attempt*nodes*repos)*time.Microsecond)
						ref := fmt.Sprintf("refs/heads/live-%s-%d", entry, attempt)
						err := cas(client, entry, r, ref, 0, uint64(100000+attempt))
						if err == nil {
							return
						}
						if time.Since(healed) >= livenessBound {
							e, ok := c.Entry(entry, r)
							t.Errorf("liveness: %s accepted no push through %s within %s of the heal; last error: %v; %s's entry: %+v (present %v)",
								r, entry, livenessBound, err, entry, e, ok)
							return
						}
						time.Sleep(rc.FollowerPoll)
					}
				})
			}
		}
	})
	wg.Wait()

	// The durable state ends every register's history: a read after
	// everything else, by a client of its own.
	call := time.Now()
	durable := map[string]map[string]uint64{}
	for _, r := range repoNames {
		if durable[r], err = c.Refs(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]bool{}
	for _, o := range hist.Ops() {
		keys[o.Key] = true
	}
	for k := range keys {
		r, ref, _ := strings.Cut(k, " ")
		v, ok := durable[r][ref]
		hist.Add(linearize.Op{Client: workers + nodes*repos, Key: k, Kind: linearize.Read, Value: value(v, ok), Call: call, Return: call, Note: "durable"})
	}
	checkHistory(t, seed, hist.Ops())
	for _, v := range c.Violations() {
		t.Errorf("two writers in one epoch: %s", v)
	}
	t.Logf("seed %d: %d/%d operations succeeded, %d in the history", seed, attempts-failed, attempts, hist.Len())
	return tr
}
