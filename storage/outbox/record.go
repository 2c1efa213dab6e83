package outbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/refdb"
)

// Bounds of one repository's outbox (the limits table, docs/operations.md).
const (
	// MaxHooks is how many hooks one repository may have.
	MaxHooks = 20
	// MaxPending is how many deliveries one hook may have waiting; events
	// past it are dropped and counted (Lane.Dropped): the outbox lives in
	// the repository's database, which is held in memory.
	MaxPending = 10000
	// MaxLog is how many finished deliveries each hook's log keeps (the
	// newest).
	MaxLog = 50
	// MaxAttemptsKept is how many attempts a delivery keeps (the newest;
	// Delivery.Attempts counts them all).
	MaxAttemptsKept = 5
	// maxErrorLen bounds an attempt's error text.
	maxErrorLen = 200
)

// Key prefixes (see doc.go).
const (
	prefixHook  = "hook/"
	prefixLane  = "hookn/"
	prefixQueue = "hookq/"
	prefixLog   = "hooklog/"
	keySeq      = "meta/hookseq"
)

// Hook is one webhook of a repository. Secret signs every delivery and is
// never shown again after the hook is created (Public).
type Hook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Secret    string    `json:"secret"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by,omitempty"`
	Created   time.Time `json:"created"`
}

// Wants reports whether h subscribes to kind.
func (h Hook) Wants(kind string) bool { return slices.Contains(h.Events, kind) }

// Public is h without its secret, as listings show it.
func (h Hook) Public() Hook {
	h.Secret = ""
	return h
}

// Lane is one hook's queue as counters: deliveries waiting, finished ones
// in the log, and events dropped because MaxPending were waiting.
type Lane struct {
	Pending int `json:"pending"`
	Logged  int `json:"logged"`
	Dropped int `json:"dropped,omitempty"`
}

// Delivery states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateFailed    = "failed" // given up: its retry window passed
)

// Delivery is one event for one hook.
type Delivery struct {
	// ID is the delivery id (X-Rgit-Delivery): stable across retries and
	// redeliveries, so receivers de-duplicate by it.
	ID    string `json:"id"`
	Seq   uint64 `json:"seq"`
	Hook  string `json:"hook"`
	Event Event  `json:"event"`
	// Queued is when it entered the queue (its retry window starts then).
	Queued time.Time `json:"queued"`
	State  string    `json:"state"`
	// Attempts counts every attempt; Last keeps the newest few.
	Attempts int       `json:"attempts"`
	Last     []Attempt `json:"last,omitempty"`
	// Next is when the next attempt is due (zero: at once).
	Next time.Time `json:"next,omitzero"`
	// Redelivered: queued again by redeliver.
	Redelivered bool `json:"redelivered,omitempty"`
}

// Attempt is one try at sending a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// Status is the receiver's HTTP status; 0 when none came back.
	Status int   `json:"status,omitempty"`
	Millis int64 `json:"ms"`
	// Error says why the attempt failed (empty for a 2xx answer).
	Error string `json:"error,omitempty"`
}

// OK reports whether the receiver accepted the delivery (2xx).
func (a Attempt) OK() bool { return a.Error == "" && a.Status >= 200 && a.Status < 300 }

// record appends a to d, keeping the newest MaxAttemptsKept.
func (d Delivery) record(a Attempt) Delivery {
	if len(a.Error) > maxErrorLen {
		a.Error = a.Error[:maxErrorLen] + "…"
	}
	d.Attempts++
	d.Last = append(slices.Clone(d.Last), a)
	if n := len(d.Last); n > MaxAttemptsKept {
		d.Last = d.Last[n-MaxAttemptsKept:]
	}
	return d
}

func hookKey(id string) string     { return prefixHook + id }
func laneKey(id string) string     { return prefixLane + id }
func queuePrefix(id string) string { return prefixQueue + id + "/" }
func logPrefix(id string) string   { return prefixLog + id + "/" }
func seqSuffix(seq uint64) string  { return fmt.Sprintf("%016x", seq) }
func queueKey(d Delivery) string   { return queuePrefix(d.Hook) + seqSuffix(d.Seq) }
func logKey(d Delivery) string     { return logPrefix(d.Hook) + seqSuffix(d.Seq) }

// NewHookID returns a new hook id: 16 hex digits.
func NewHookID() string { return randomHex(8) }

// newDeliveryID returns a random UUID (version 4), the form receivers of
// other forges' webhooks expect.
func newDeliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ValidHookID reports whether id has the form NewHookID makes, so an id
// from a command line cannot name other keys.
func ValidHookID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// View reads the outbox of one state of a repository's database.
type View struct{ v *refdb.View }

// Read is the outbox of v.
func Read(v *refdb.View) View { return View{v: v} }

// Hooks lists the hooks, by id.
func (o View) Hooks() ([]Hook, error) {
	var out []Hook
	for k, b := range o.v.Scan(prefixHook) {
		var h Hook
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// Hook returns the hook id.
func (o View) Hook(id string) (Hook, bool, error) {
	b, ok := o.v.Get(hookKey(id))
	if !ok {
		return Hook{}, false, nil
	}
	var h Hook
	if err := json.Unmarshal(b, &h); err != nil {
		return Hook{}, false, fmt.Errorf("decode %s: %w", hookKey(id), err)
	}
	return h, true, nil
}

// Lane returns hook id's counters.
func (o View) Lane(id string) (Lane, error) {
	var l Lane
	b, ok := o.v.Get(laneKey(id))
	if !ok {
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("decode %s: %w", laneKey(id), err)
	}
	return l, nil
}

// Head returns the first n deliveries waiting for hook id, in order.
func (o View) Head(id string, n int) ([]Delivery, error) {
	return o.scan(queuePrefix(id), n)
}

// Log returns hook id's finished deliveries, oldest first.
func (o View) Log(id string) ([]Delivery, error) { return o.scan(logPrefix(id), MaxLog) }

func (o View) scan(prefix string, n int) ([]Delivery, error) {
	var out []Delivery
	for k, b := range o.v.Scan(prefix) {
		if len(out) == n {
			break
		}
		var d Delivery
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Pending is how many deliveries wait, over every hook, and when the
// oldest of them was queued (zero when none wait).
func (o View) Pending() (n int, oldest time.Time, err error) {
	hooks, err := o.Hooks()
	if err != nil {
		return 0, time.Time{}, err
	}
	for _, h := range hooks {
		l, err := o.Lane(h.ID)
		if err != nil {
			return 0, time.Time{}, err
		}
		if l.Pending == 0 {
			continue
		}
		n += l.Pending
		head, err := o.Head(h.ID, 1)
		if err != nil {
			return 0, time.Time{}, err
		}
		if len(head) > 0 && (oldest.IsZero() || head[0].Queued.Before(oldest)) {
			oldest = head[0].Queued
		}
	}
	return n, oldest, nil
}

// Find returns the delivery with this id: waiting, or in a log.
func (o View) Find(id string) (Delivery, bool, error) {
	for _, prefix := range []string{prefixQueue, prefixLog} {
		for k, b := range o.v.Scan(prefix) {
			if !bytes.Contains(b, []byte(id)) {
				continue // cheap filter before decoding
			}
			var d Delivery
			if err := json.Unmarshal(b, &d); err != nil {
				return Delivery{}, false, fmt.Errorf("decode %s: %w", k, err)
			}
			if d.ID == id {
				return d, true, nil
			}
		}
	}
	return Delivery{}, false, nil
}

func nextSeq(v *refdb.View) (uint64, []byte, error) {
	b, ok := v.Get(keySeq)
	if !ok {
		return 1, nil, nil
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("decode %s: %w", keySeq, err)
	}
	return n, b, nil
}

// casOp writes value under key on the condition that it still holds
// old (absent when old is nil).
func casOp(key string, old, value []byte) refdb.Op {
	if old == nil {
		return refdb.Create(key, value)
	}
	return refdb.Swap(key, old, value)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("outbox: encode %T: %v", v, err)) // plain structs only
	}
	return b
}
