// Package admission keeps a node's pack work inside its memory budget.
// Serving a pack (a fetch or clone) and ingesting one (a push) reserve an
// estimate of the memory they will hold before they start; a push whose
// pack declares objects bigger than the estimate covers grows its
// reservation (Grow) before it holds them. When the budget is spent, new
// work is refused (HTTP 503 with Retry-After, a git "ERR server busy"
// line over SSH and protocol v2; a push's growth: "unpack server busy")
// rather than the node being OOM-killed. Work already admitted always
// finishes. Background maintenance (roll-ups, repacks) reserves too,
// within half the budget, and waits when refused. Trimmer returns memory
// to the OS once the work is over.
//
// The budget is the container's (cgroup memory.max), or RGIT_MEMORY_LIMIT
// when that is lower or there is no cgroup limit; Derive turns it and
// RLIMIT_NOFILE into the limits the node runs with. Decide is the whole
// admission rule, a pure function (DecideGrow applies it to growth);
// Controller is the thin locked shell around it. The package imports only
// the standard library and the Prometheus client.
package admission

import (
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is the sort of pack work being admitted.
type Kind int

const (
	Fetch       Kind = iota // serving a pack: clone, fetch
	Push                    // ingesting a pack
	Maintenance             // background roll-ups and repacks: may wait
	Read                    // an expensive read-API answer (see Reads)
)

var kinds = []Kind{Fetch, Push, Maintenance, Read}

func (k Kind) String() string {
	switch k {
	case Push:
		return "push"
	case Maintenance:
		return "maintenance"
	case Read:
		return "read"
	}
	return "fetch"
}

// Estimates of what one unit of pack work holds in memory: buffers
// (pkt-line, zlib, side-band, the HTTP and SSH stacks) plus per-object
// state (the list of objects to send with their offsets, the commit graph
// of the walk; for a push, the index of the incoming objects and the
// connectivity walk over the existing ones). Packs stream from the local
// cache and pushes to a temporary file, so neither is held whole.
// Measured: 26 concurrent clones and pushes of a 24 MiB repository
// (TestMemoryAdmission without a budget) peaked at 50 MiB RSS over a
// 25 MiB idle node, about 1 MiB each; the bases leave room for bigger
// buffers under slow clients. An underestimate is an OOM kill, an
// overestimate a 503 the client retries.
const (
	FetchBase      = 4 << 20
	PushBase       = 8 << 20
	BytesPerObject = 256
)

// Estimate is the reservation for work of kind on a repository holding
// objects objects (for maintenance: the objects it rewrites, which it
// holds an index entry for, as a push does).
func Estimate(kind Kind, objects int64) int64 {
	base := int64(FetchBase)
	if kind != Fetch {
		base = PushBase
	}
	return base + max(objects, 0)*BytesPerObject
}

// Limits are what a node derives from its memory budget and descriptor
// limit.
type Limits struct {
	// Memory is the node's budget in bytes; 0: unknown (no cgroup limit,
	// no RGIT_MEMORY_LIMIT), and admission admits everything.
	Memory int64
	// Work is the part of Memory pack work may reserve; the rest is for
	// the Go runtime, open databases, pack indexes and garbage-collection
	// headroom.
	Work int64
	// GoMemLimit is the soft limit for the Go runtime (debug.SetMemoryLimit):
	// the collector works harder before the heap reaches the budget.
	GoMemLimit int64
	// GCPercent is the collector's target (debug.SetGCPercent) when GOGC
	// is unset: UnboundedGCPercent without a budget, else 100 (Go's
	// default; GoMemLimit paces the collector near the budget).
	GCPercent int
	// MaxActive caps concurrent pack work by descriptors: each holds a
	// connection, and usually a pack file and a temporary file.
	MaxActive int
	// OpenPacks is the pack cache's default budget of open pack files
	// (RGIT_MAX_OPEN_PACKS unset): a quarter of the descriptors, and with
	// a budget at most its pack-cache share at packFileCost a pack.
	OpenPacks int
}

// The pack cache's share of the budget: an open pack holds its index
// mapping and read buffers, about packFileCost on a busy node.
const (
	cacheShare   = 2 // tenths
	packFileCost = 2 << 20
)

// workShare is the fraction (in tenths) of the budget pack work may
// reserve.
const workShare = 6

// UnboundedGCPercent is Limits.GCPercent on a node without a budget. With
// nothing for a soft limit to pace against, the heap may grow to
// (1 + GOGC/100) times what is live before a collection, and the runtime
// keeps about a tenth more from the OS: at Go's default of 100, indexing
// a 400,000-object push (about 80 MB live) held 250 MB of RSS. At 50 the
// peak is a third lower for a few percent more collector CPU (measured:
// `rgit-bench memory` on the big fixture, push VmHWM 248 -> 206 MB).
const UnboundedGCPercent = 50

// Derive computes the node's limits from the cgroup limit (0: none),
// RGIT_MEMORY_LIMIT (0: unset) and the soft RLIMIT_NOFILE (0: unknown).
// The lower of the two memory limits wins: a setting above the cgroup's
// would only move the failure from a 503 to an OOM kill.
//
//	cgroup  configured  → Memory
//	0       0              0 (no admission by memory; GCPercent
//	                         UnboundedGCPercent)
//	c       0              c
//	0       m              m
//	c       m              min(c, m)
func Derive(cgroup, configured int64, nofile uint64) Limits {
	mem := cgroup
	if configured > 0 && (mem <= 0 || configured < mem) {
		mem = configured
	}
	l := Limits{MaxActive: maxActive(nofile), OpenPacks: openPacks(nofile, mem), GCPercent: UnboundedGCPercent}
	if mem > 0 {
		l.Memory = mem
		l.Work = mem / 10 * workShare
		l.GoMemLimit = mem / 10 * 9
		l.GCPercent = 100
	}
	return l
}

// openPacks is Limits.OpenPacks: never below 16, so that a small budget
// still serves repositories with several packs (they reopen lazily).
func openPacks(nofile uint64, mem int64) int {
	n := 256 // the descriptor limit is unknown
	if nofile > 0 {
		n = int(max(min(nofile, 1<<20)/4, 16))
	}
	if mem > 0 {
		n = min(n, max(int(mem/10*cacheShare/packFileCost), 16))
	}
	return n
}

// maxActive leaves a quarter of the descriptors to open packs (the pack
// cache's default share) and some to databases and listeners, and gives
// each unit of work three.
func maxActive(nofile uint64) int {
	if nofile == 0 || nofile > 1<<20 {
		nofile = 1 << 20
	}
	return max(int(nofile*3/4-64)/3, 4)
}

// ParseCgroupLimit reads a cgroup memory limit file: v2 memory.max
// ("max" or bytes) or v1 memory.limit_in_bytes (a huge number for none).
// It returns 0 for no limit.
func ParseCgroupLimit(content string) (int64, bool) {
	s := strings.TrimSpace(content)
	if s == "max" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n >= 1<<60 { // v1 "unlimited" is the largest page-aligned int64
		return 0, true
	}
	return n, true
}

// CgroupFiles are where a process finds its memory limit: cgroup v2 first,
// then v1.
var CgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// State is what Decide looks at.
type State struct {
	Work      int64 // Limits.Work; 0: unlimited
	MaxActive int   // Limits.MaxActive; 0: unlimited
	Reserved  int64 // sum of the admitted estimates still running
	Active    int   // admitted work still running
}

// Verdict is Decide's answer.
type Verdict int

const (
	Admit Verdict = iota
	RefuseMemory
	RefuseActive
)

// Decide admits a unit of work of kind with estimate est, or says why
// not. Background maintenance takes at most half the work budget, so
// clients are not refused for the sake of work that can wait; it waits
// instead (the maintainer retries with backoff).
//
//	no limits                          admit
//	active >= MaxActive                refuse (descriptors)
//	nothing running                    admit, even if est > Work: a
//	                                   repository larger than the estimate
//	                                   allows must still be servable alone
//	maintenance, reserved + est >      refuse (memory)
//	  Work/2
//	reserved + est > Work              refuse (memory)
//	otherwise                          admit
func Decide(s State, kind Kind, est int64) Verdict {
	if s.MaxActive > 0 && s.Active >= s.MaxActive {
		return RefuseActive
	}
	if s.Work <= 0 || s.Active == 0 {
		return Admit
	}
	if kind == Maintenance && s.Reserved+est > s.Work/2 {
		return RefuseMemory
	}
	if s.Reserved+est > s.Work {
		return RefuseMemory
	}
	return Admit
}

// DecideGrow admits extra memory for work of kind already admitted (and
// counted in s.Active): a push whose pack declares objects bigger than
// its estimate covers. It is Decide with the work itself not counted as
// running and no descriptor check (it holds its descriptors already):
// refused when the reservations would pass the budget while other work
// runs; alone, the work may grow past the budget, as it may start past
// it.
func DecideGrow(s State, kind Kind, extra int64) Verdict {
	s.Active = max(s.Active-1, 0)
	s.MaxActive = 0
	return Decide(s, kind, extra)
}

// Controller admits pack work on one node. Its zero value is not usable;
// New makes one. A nil *Controller admits everything.
type Controller struct {
	mu    sync.Mutex
	state State
	m     *metrics
}

// New returns a Controller for l, registering its metrics on reg (nil:
// none).
func New(l Limits, reg prometheus.Registerer) *Controller {
	c := &Controller{state: State{Work: l.Work, MaxActive: l.MaxActive}, m: newMetrics(reg)}
	c.m.budget.Set(float64(l.Memory))
	c.m.work.Set(float64(l.Work))
	return c
}

// Reserve asks to start work of kind with estimate est. If admitted, it
// returns a release function the caller must call exactly once when the
// work ends; otherwise ok is false and nothing was reserved.
func (c *Controller) Reserve(kind Kind, est int64) (release func(), ok bool) {
	if c == nil {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch Decide(c.state, kind, est) {
	case RefuseMemory:
		c.m.refused.WithLabelValues(kind.String(), "memory").Inc()
		return nil, false
	case RefuseActive:
		c.m.refused.WithLabelValues(kind.String(), "descriptors").Inc()
		return nil, false
	}
	c.state.Reserved += est
	c.state.Active++
	c.m.admitted.WithLabelValues(kind.String()).Inc()
	c.m.reserved.Set(float64(c.state.Reserved))
	c.m.active.Set(float64(c.state.Active))
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.state.Reserved -= est
			c.state.Active--
			c.m.reserved.Set(float64(c.state.Reserved))
			c.m.active.Set(float64(c.state.Active))
		})
	}, true
}

// Grow asks for extra memory for work of kind that Reserve admitted and
// that has not ended yet. If granted, it returns a release function the
// caller must call exactly once, when the work ends; otherwise ok is
// false and nothing was reserved.
func (c *Controller) Grow(kind Kind, extra int64) (release func(), ok bool) {
	if c == nil {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if DecideGrow(c.state, kind, extra) != Admit {
		c.m.refused.WithLabelValues(kind.String(), "memory").Inc()
		return nil, false
	}
	c.state.Reserved += extra
	c.m.reserved.Set(float64(c.state.Reserved))
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.state.Reserved -= extra
			c.m.reserved.Set(float64(c.state.Reserved))
		})
	}, true
}

type metrics struct {
	admitted, refused              *prometheus.CounterVec
	reserved, active, budget, work prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &metrics{
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_admission_admitted_total",
			Help: "Pack work (fetch, push, maintenance) admitted against the memory budget."}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_admission_refusals_total",
			Help: "Pack work refused (clients: 503 / ERR server busy; maintenance: deferred), by kind (fetch, push, maintenance) and reason (memory, descriptors)."}, []string{"kind", "reason"}),
		reserved: g("rgit_admission_reserved_bytes", "Memory reserved by admitted pack work still running."),
		active:   g("rgit_admission_active", "Admitted pack work still running."),
		budget:   g("rgit_memory_budget_bytes", "The node's memory budget (cgroup memory.max or RGIT_MEMORY_LIMIT); 0: none."),
		work:     g("rgit_admission_work_budget_bytes", "The part of the memory budget pack work may reserve."),
	}
	// Every series exists from the start, so dashboards and alerts see a
	// zero rather than nothing.
	for _, k := range kinds {
		m.admitted.WithLabelValues(k.String())
		for _, reason := range []string{"memory", "descriptors"} {
			m.refused.WithLabelValues(k.String(), reason)
		}
	}
	if reg != nil {
		reg.MustRegister(m.admitted, m.refused, m.reserved, m.active, m.budget, m.work)
	}
	return m
}
