// Package linearize checks a history of ref reads and compare-and-swap ref
// updates for linearizability, as etcd's robustness tests check theirs: each
// ref is a register whose value is an object ID (or absent), a read returns
// the value, and a CAS (a push carrying the old value it expects) sets it
// only if the value is the expected one. Every operation is recorded with
// the time it was invoked and the time it returned; an operation whose
// outcome is unknown (a push that failed or timed out: it may have been
// applied) returns "never", so a linearization may place it anywhere after
// its invocation, the end of the history included, where it changes
// nothing anyone saw. The check is github.com/anishathalye/porcupine's.
//
// A history that is not linearizable is reported with the minimal
// non-linearizable part of it: the shortest prefix (operations invoked by
// some time, those still running then counted as unknown) of the one ref
// whose history fails, as text, and porcupine's visualization of that
// ref's whole history as an HTML file.
//
// It is test infrastructure: it imports porcupine and the standard library.
package linearize

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation did.
type Kind uint8

const (
	// Read observed the ref's value (ls-remote, fetch, a read API call).
	Read Kind = iota
	// CAS set the ref to New if its value was Old (a push with its old
	// value; Old "" creates the ref).
	CAS
)

// Outcome is how an operation ended.
type Outcome uint8

const (
	// OK: a read returned Value; a CAS was applied.
	OK Outcome = iota
	// Rejected: a CAS found the ref not at Old and changed nothing (git's
	// "stale info" / "failed to update ref" with the push refused before
	// anything was written).
	Rejected
	// Unknown: the operation failed without saying whether it took effect
	// (a timeout, a connection lost mid-push, a 503 from a node that may
	// have applied it). A read that fails observed nothing and is not
	// recorded.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// Op is one recorded operation on one ref.
type Op struct {
	Client int    // who issued it (a worker); the visualization's row
	Key    string // the register: repository and ref, e.g. "alice/r0 refs/heads/main"
	Kind   Kind
	// Old and New are a CAS's expected and new value, Value a read's
	// result; "" is an absent ref.
	Old, New, Value string
	Outcome         Outcome
	Call, Return    time.Time
	// Note is free text for the report (the node that served, the error).
	Note string
}

func (o Op) String() string {
	var s string
	switch o.Kind {
	case Read:
		s = "read → " + show(o.Value)
	default:
		s = fmt.Sprintf("cas %s → %s: %s", show(o.Old), show(o.New), o.Outcome)
	}
	if o.Note != "" {
		s += " (" + o.Note + ")"
	}
	return s
}

func show(v string) string {
	if v == "" {
		return "absent"
	}
	return v
}

// History collects operations from concurrent clients. The zero value is
// ready to use.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Add records op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the operations recorded so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Len is how many operations were recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Result is a check's verdict.
type Result struct {
	// OK: every ref's history is linearizable. False with Timeout set when
	// the checker gave up (no verdict).
	OK      bool
	Timeout bool
	// Key is the first ref (in key order) whose history is not
	// linearizable; Excerpt its minimal non-linearizable prefix as text;
	// Visualization the path of porcupine's HTML view of its history
	// (empty if none was written).
	Key, Excerpt, Visualization string
	Ops                         int // operations checked
}

// Check checks ops. dir, if not empty, receives the visualization of a
// failing ref's history. timeout bounds the search (0: none).
func Check(ops []Op, dir string, timeout time.Duration) Result {
	res := Result{OK: true, Ops: len(ops)}
	byKey := map[string][]Op{}
	for _, o := range ops {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h := byKey[k]
		switch r := porcupine.CheckOperationsTimeout(model, operations(h, time.Time{}), timeout); r {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.OK, res.Timeout = false, true
			res.Key = k
			return res
		}
		res.OK, res.Key = false, k
		prefix, failing := minimalPrefix(h)
		res.Excerpt = excerpt(k, prefix, failing)
		if dir != "" {
			_, info := porcupine.CheckOperationsVerbose(model, operations(h, time.Time{}), timeout)
			path := filepath.Join(dir, "linearize-"+strings.NewReplacer("/", "_", " ", "_").Replace(k)+".html")
			if err := porcupine.VisualizePath(model, info, path); err == nil {
				res.Visualization = path
			} else {
				res.Excerpt += fmt.Sprintf("\n(visualization not written: %v)", err)
			}
		}
		return res
	}
	return res
}

// never is the return time of an operation whose outcome is unknown.
const never = math.MaxInt64

// operations converts h to porcupine's form. With cut set, only the
// operations invoked by cut count, and those that returned after it are
// unknown: what an observer knew at cut.
func operations(h []Op, cut time.Time) []porcupine.Operation {
	var t0 time.Time
	for _, o := range h {
		if t0.IsZero() || o.Call.Before(t0) {
			t0 = o.Call
		}
	}
	out := make([]porcupine.Operation, 0, len(h))
	for _, o := range h {
		if !cut.IsZero() && o.Call.After(cut) {
			continue
		}
		pending := !cut.IsZero() && o.Return.After(cut)
		if pending && o.Kind == Read {
			continue // a read still running observed nothing yet
		}
		ret := int64(o.Return.Sub(t0))
		if o.Outcome == Unknown || pending {
			ret = never
			if o.Outcome == OK || o.Outcome == Rejected {
				o.Outcome = Unknown
			}
		}
		out = append(out, porcupine.Operation{ClientId: o.Client, Input: o, Call: int64(o.Call.Sub(t0)), Output: o.Outcome, Return: ret})
	}
	return out
}

// minimalPrefix returns the shortest prefix of h that is not
// linearizable: what was known when some operation returned (those
// invoked by then, the ones still running counted as unknown), sorted by
// invocation, and the operation whose return made it fail.
func minimalPrefix(h []Op) (prefix []Op, failing Op) {
	var done []Op
	for _, o := range h {
		if o.Outcome != Unknown {
			done = append(done, o)
		}
	}
	slices.SortStableFunc(done, func(a, b Op) int { return a.Return.Compare(b.Return) })
	// The whole history fails, so the prefix at the last return does.
	lo, hi := 0, len(done)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if porcupine.CheckOperations(model, operations(h, done[mid].Return)) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	failing = done[hi]
	for _, o := range h {
		if !o.Call.After(failing.Return) {
			prefix = append(prefix, o)
		}
	}
	slices.SortStableFunc(prefix, func(a, b Op) int { return a.Call.Compare(b.Call) })
	return prefix, failing
}

// excerptOps bounds the excerpt: the operations invoked last before the
// failing one returned.
const excerptOps = 24

func excerpt(key string, prefix []Op, failing Op) string {
	t0 := prefix[0].Call
	var b strings.Builder
	fmt.Fprintf(&b, "%s: not linearizable; the shortest failing prefix has %d operations (by invocation; times from the first; an unknown outcome may take effect any time after its invocation)", key, len(prefix))
	skip := max(0, len(prefix)-excerptOps)
	if skip > 0 {
		fmt.Fprintf(&b, "\n  … %d earlier operations", skip)
	}
	for _, o := range prefix[skip:] {
		ret := o.Return.Sub(t0).String()
		if o.Outcome == Unknown {
			ret = "?"
		}
		mark := ""
		if o == failing {
			mark = "   ← no linearization explains this with the operations above"
		}
		fmt.Fprintf(&b, "\n  client %d [%s, %s] %s%s", o.Client, o.Call.Sub(t0), ret, o, mark)
	}
	return b.String()
}

// model is a register per key with reads and compare-and-swap; the
// history is partitioned by key before it reaches the model.
var model = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		v, o, out := state.(string), input.(Op), output.(Outcome)
		switch {
		case o.Kind == Read:
			return v == o.Value, v
		case out == OK:
			return v == o.Old, o.New
		case out == Rejected:
			return v != o.Old, v
		case v == o.Old: // unknown, and it took effect here
			return true, o.New
		}
		return true, v // unknown; it cannot have taken effect here
	},
	DescribeOperation: func(input, output any) string {
		o := input.(Op)
		o.Outcome = output.(Outcome)
		return o.String()
	},
	DescribeState: func(state any) string { return show(state.(string)) },
}

// Report checks h and fails t with the result: the excerpt and the path of
// the visualization (written under dir). It returns the result.
func Report(t testing.TB, h *History, dir string, timeout time.Duration) Result {
	t.Helper()
	r := Check(h.Ops(), dir, timeout)
	switch {
	case r.OK:
		t.Logf("linearizable: %d operations", r.Ops)
	case r.Timeout:
		t.Logf("linearizability check of %d operations gave up after %s on %s (no verdict)", r.Ops, timeout, r.Key)
	default:
		t.Errorf("history not linearizable (%d operations):\n%s\nvisualization: %s", r.Ops, r.Excerpt, orNone(r.Visualization))
	}
	return r
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
