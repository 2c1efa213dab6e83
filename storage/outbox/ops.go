package outbox

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rgit/rgit/storage/refdb"
)

// Sentinel errors callers branch on.
var (
	// ErrTooManyHooks: the repository has MaxHooks hooks already.
	ErrTooManyHooks = errors.New("too many hooks")
	// ErrNoHook: no hook has that id.
	ErrNoHook = errors.New("no such hook")
	// ErrNoDelivery: no delivery has that id (its log entry may have been
	// trimmed).
	ErrNoDelivery = errors.New("no such delivery")
)

// AddHook returns the operations that add h to v's hooks.
func AddHook(v *refdb.View, h Hook) (refdb.Txn, error) {
	hooks, err := Read(v).Hooks()
	if err != nil {
		return nil, err
	}
	if len(hooks) >= MaxHooks {
		return nil, fmt.Errorf("%w (limit %d, fixed)", ErrTooManyHooks, MaxHooks)
	}
	return refdb.Txn{refdb.Create(hookKey(h.ID), mustJSON(h)), refdb.Remove(laneKey(h.ID))}, nil
}

// RemoveHook returns the hook id and the operations that remove it with
// everything it has waiting and its log.
func RemoveHook(v *refdb.View, id string) (Hook, refdb.Txn, error) {
	h, ok, err := Read(v).Hook(id)
	if err != nil {
		return Hook{}, nil, err
	}
	if !ok {
		return Hook{}, nil, fmt.Errorf("hook %s: %w", id, ErrNoHook)
	}
	txn := refdb.Txn{refdb.Remove(hookKey(id)), refdb.Remove(laneKey(id))}
	for _, prefix := range []string{queuePrefix(id), logPrefix(id)} {
		for k := range v.Scan(prefix) {
			txn = append(txn, refdb.Remove(k))
		}
	}
	return h, txn, nil
}

// lanes accumulates the counter changes of one transaction, written once
// at its end with compare-and-set on what v held.
type lanes struct {
	v   *refdb.View
	cur map[string]*Lane
	old map[string][]byte
}

func newLanes(v *refdb.View) *lanes {
	return &lanes{v: v, cur: map[string]*Lane{}, old: map[string][]byte{}}
}

func (ls *lanes) get(id string) (*Lane, error) {
	if l, ok := ls.cur[id]; ok {
		return l, nil
	}
	l, err := Read(ls.v).Lane(id)
	if err != nil {
		return nil, err
	}
	ls.old[id], _ = ls.v.Get(laneKey(id))
	ls.cur[id] = &l
	return &l, nil
}

func (ls *lanes) ops() refdb.Txn {
	var txn refdb.Txn
	ids := make([]string, 0, len(ls.cur))
	for id := range ls.cur {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		txn = append(txn, casOp(laneKey(id), ls.old[id], mustJSON(ls.cur[id])))
	}
	return txn
}

// Enqueue returns the operations that queue each event for every hook of
// v subscribed to its kind, to be committed in the same transaction as
// the change the events describe. No hook: nothing. A hook with
// MaxPending deliveries waiting drops the event and counts it.
func Enqueue(v *refdb.View, events []Event, now time.Time) (refdb.Txn, error) {
	if len(events) == 0 {
		return nil, nil
	}
	hooks, err := Read(v).Hooks()
	if err != nil || len(hooks) == 0 {
		return nil, err
	}
	seq, oldSeq, err := nextSeq(v)
	if err != nil {
		return nil, err
	}
	first := seq
	ls := newLanes(v)
	var txn refdb.Txn
	for _, e := range events {
		for _, h := range hooks {
			if !h.Wants(e.Kind) {
				continue
			}
			l, err := ls.get(h.ID)
			if err != nil {
				return nil, err
			}
			if l.Pending >= MaxPending {
				l.Dropped++
				continue
			}
			l.Pending++
			d := Delivery{ID: newDeliveryID(), Seq: seq, Hook: h.ID, Event: e, Queued: now, State: StatePending}
			seq++
			txn = append(txn, refdb.Create(queueKey(d), mustJSON(d)))
		}
	}
	if len(ls.cur) == 0 {
		return nil, nil
	}
	if seq != first {
		txn = append(txn, casOp(keySeq, oldSeq, []byte(strconv.FormatUint(seq, 10))))
	}
	return append(txn, ls.ops()...), nil
}

// Result is a delivery after an attempt (or after its window passed):
// Done when it leaves the queue for the log (delivered or failed).
type Result struct {
	Delivery Delivery
	Done     bool
}

// Finish returns the operations that record results: a delivery still
// waiting is rewritten, a done one moves to its hook's log, which keeps
// its newest MaxLog. A delivery no longer waiting (its hook removed, or
// the result arriving twice) is skipped.
func Finish(v *refdb.View, results []Result) (refdb.Txn, error) {
	ls := newLanes(v)
	var txn refdb.Txn
	logged := map[string][]Delivery{} // per hook, done in this transaction
	for _, r := range results {
		d := r.Delivery
		old, ok := v.Get(queueKey(d))
		if !ok {
			continue
		}
		if !r.Done {
			txn = append(txn, refdb.Swap(queueKey(d), old, mustJSON(d)))
			continue
		}
		l, err := ls.get(d.Hook)
		if err != nil {
			return nil, err
		}
		l.Pending = max(l.Pending-1, 0)
		txn = append(txn, refdb.RemoveIf(queueKey(d), old))
		logged[d.Hook] = append(logged[d.Hook], d)
	}
	for id, ds := range logged {
		l := ls.cur[id]
		slices.SortFunc(ds, func(a, b Delivery) int { return compareSeq(a.Seq, b.Seq) })
		if len(ds) > MaxLog {
			ds = ds[len(ds)-MaxLog:]
		}
		// The oldest entries go first: those of the log as it was, then
		// (when a batch alone fills it) the oldest of the batch.
		drop := max(l.Logged+len(ds)-MaxLog, 0)
		for k := range v.Scan(logPrefix(id)) {
			if drop == 0 {
				break
			}
			txn = append(txn, refdb.Remove(k))
			drop--
			l.Logged--
		}
		for _, d := range ds {
			txn = append(txn, refdb.Set(logKey(d), mustJSON(d)))
			l.Logged++
		}
		l.Logged = min(l.Logged, MaxLog)
	}
	return append(txn, ls.ops()...), nil
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Redeliver returns the delivery id and the operations that send it
// again: a waiting one is made due at once (keeping its place), a
// finished one is queued again at the end of its hook's queue under the
// same id, its window starting now.
func Redeliver(v *refdb.View, id string, now time.Time) (Delivery, refdb.Txn, error) {
	d, ok, err := Read(v).Find(id)
	if err != nil {
		return Delivery{}, nil, err
	}
	if !ok {
		return Delivery{}, nil, fmt.Errorf("delivery %s: %w", id, ErrNoDelivery)
	}
	if d.State == StatePending {
		old, _ := v.Get(queueKey(d))
		d.Next = time.Time{}
		return d, refdb.Txn{refdb.Swap(queueKey(d), old, mustJSON(d))}, nil
	}
	if _, ok, err := Read(v).Hook(d.Hook); err != nil || !ok {
		return Delivery{}, nil, errors.Join(err, fmt.Errorf("delivery %s: hook %s: %w", id, d.Hook, ErrNoHook))
	}
	seq, oldSeq, err := nextSeq(v)
	if err != nil {
		return Delivery{}, nil, err
	}
	ls := newLanes(v)
	l, err := ls.get(d.Hook)
	if err != nil {
		return Delivery{}, nil, err
	}
	if l.Pending >= MaxPending {
		return Delivery{}, nil, fmt.Errorf("delivery %s: %d deliveries wait already (limit %d, fixed)", id, l.Pending, MaxPending)
	}
	l.Pending++
	d.Seq, d.Queued, d.State, d.Next, d.Redelivered = seq, now, StatePending, time.Time{}, true
	txn := refdb.Txn{
		refdb.Create(queueKey(d), mustJSON(d)),
		casOp(keySeq, oldSeq, []byte(strconv.FormatUint(seq+1, 10))),
	}
	return d, append(txn, ls.ops()...), nil
}
