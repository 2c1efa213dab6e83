package gitproto

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/rgit/rgit/storage/object"
)

// Options configures one protocol session.
type Options struct {
	// Protocol is 0, 1 or 2, normally from ParseProtocol of the Git-Protocol
	// header or the GIT_PROTOCOL environment variable. Receive-pack has no
	// v2 and treats 2 as 0, as git does.
	Protocol int
	// StatelessRPC selects HTTP mode: each call handles one request/response
	// round and does not advertise (unless AdvertiseOnly).
	StatelessRPC bool
	// AdvertiseOnly writes only the ref/capability advertisement (HTTP GET
	// /info/refs). The "# service=..." preamble is the HTTP layer's job.
	AdvertiseOnly bool
	// Agent is advertised as agent=<Agent>; DefaultAgent when empty.
	Agent string
	// Limits bound fetch and push requests; zero fields take the defaults.
	Limits
	// AdmitPack, if set, is asked before a fetch's pack work starts: once
	// its negotiation has decided that a pack follows, before any of the
	// answer that leads to it is written. Refused, it returns an error
	// wrapping ErrBusy, reported like a busy negotiation slot (an ERR line
	// full duplex, nothing written stateless). release is called once
	// the pack is written. Nothing is admitted while the session waits
	// for the client.
	AdmitPack func() (release func(), err error)
	// Input, if set, is how the session bounds the time a whole request
	// may take to arrive (Limits.RequestTimeout): the deadline of the
	// stream in is read from, or of what feeds it. A read it cuts off
	// must fail (with any error); the zero time clears it. Without it
	// only the front end's own limits apply.
	Input ReadDeadliner
}

// ReadDeadliner cuts off blocked reads at a deadline (net.Conn's
// SetReadDeadline; the zero time clears it).
type ReadDeadliner interface {
	SetReadDeadline(t time.Time) error
}

// Limits bound what one fetch or push request may make the server hold or
// do, so a hostile client cannot make it buffer unbounded lists or answer
// one line many times. Zero fields take the defaults. A request over a
// limit gets a git ERR naming it (*LimitError) as soon as the server sees
// the line that crosses it; nothing after that line is read.
type Limits struct {
	// MaxPushRefs caps the ref update commands of one push. A mirror push
	// sends one per ref, so it must exceed the refs of the largest
	// repository moved to this server.
	MaxPushRefs int
	// MaxPushOptions caps the push options (git push -o) of one push.
	MaxPushOptions int
	// MaxWants caps the distinct wants (want and want-ref lines) of one
	// fetch request.
	MaxWants int
	// MaxHaves caps the distinct haves of one negotiation: a v2 fetch
	// command, a v0/v1 stateless request, or a whole v0/v1 full-duplex
	// session (its rounds share one server state). A stateless client
	// repeats the haves already acknowledged in every request, so this is
	// also the bound on a whole stateless negotiation's common set.
	MaxHaves int
	// MaxArgBytes caps the pkt-line payload bytes of one request's
	// arguments: a v2 command's argument section, or a v0/v1 want list
	// and the have lines that follow it.
	MaxArgBytes int
	// RequestTimeout bounds the time from the server starting to wait
	// for a fetch request (a protocol v2 command with its arguments, a v0
	// want list, a v0 round of haves) to that request's last line, so a
	// client cannot hold a session by sending it a byte at a time. It
	// needs Options.Input. 0: DefaultRequestTimeout; negative: none.
	RequestTimeout time.Duration
	// Negotiations, if set, bounds the node's concurrent negotiation
	// work. A fetch takes a slot only once its whole request has arrived
	// and gives it back before it writes its answer, so a slot is never
	// held while the server waits for a client.
	Negotiations *Slots
}

// Slots bounds the concurrent negotiation work of a node (have
// matching, reachability checks) and how long a request queues for it.
// Shared by every session of the node.
type Slots struct {
	sem  *semaphore.Weighted
	n    int
	wait time.Duration
}

// NewSlots allows n negotiations at once; a request that finds them all
// taken for wait is refused as busy (wait <= 0: it waits as long as its
// session lives).
func NewSlots(n int, wait time.Duration) *Slots {
	return &Slots{sem: semaphore.NewWeighted(int64(n)), n: n, wait: wait}
}

// DefaultRequestTimeout is Limits.RequestTimeout's default.
const DefaultRequestTimeout = time.Minute

// Defaults for the zero values of Options.
const (
	DefaultAgent = "rgit/0.1"
	// DefaultMaxPushRefs admits a mirror push of a history with tens of
	// thousands of tags and release branches; the commands of a push are
	// held in memory (~150 bytes each) and committed as one transaction.
	DefaultMaxPushRefs    = 100_000
	DefaultMaxPushOptions = 32
	// DefaultMaxWants admits a mirror clone of a repository with that many
	// distinct ref tips (git sends one want per distinct tip).
	DefaultMaxWants = 200_000
	// DefaultMaxHaves: git's fetch-pack sends 16, 32, ... 16384 haves per
	// round, then 10% more each round, stops 256 haves after the first
	// ACK and repeats acknowledged haves; a fetch with common history
	// sends a few thousand. The default admits a client with about 2M
	// commits and nothing in common with the server (a v2 request then
	// carries ~10% of its history).
	DefaultMaxHaves = 200_000
	// DefaultMaxArgBytes fits DefaultMaxWants plus DefaultMaxHaves lines
	// (~50 bytes each) with room for shallow and filter lines.
	DefaultMaxArgBytes = 32 << 20
	// MaxPushOptionLen bounds one push option; the pkt-line limit bounds it
	// anyway, this keeps the total small.
	MaxPushOptionLen = 4096
	// MaxRefNameLen bounds a pushed ref name (git's own refs are far
	// shorter; file systems refuse longer paths).
	MaxRefNameLen = 4096
)

func (o Options) agent() string {
	if o.Agent == "" {
		return DefaultAgent
	}
	return o.Agent
}

func (l Limits) maxPushRefs() int    { return orDefault(l.MaxPushRefs, DefaultMaxPushRefs) }
func (l Limits) maxPushOptions() int { return orDefault(l.MaxPushOptions, DefaultMaxPushOptions) }
func (l Limits) maxWants() int       { return orDefault(l.MaxWants, DefaultMaxWants) }
func (l Limits) maxHaves() int       { return orDefault(l.MaxHaves, DefaultMaxHaves) }
func (l Limits) maxArgBytes() int    { return orDefault(l.MaxArgBytes, DefaultMaxArgBytes) }

// admitPack asks Options.AdmitPack, if set.
func (o Options) admitPack() (release func(), err error) {
	if o.AdmitPack == nil {
		return func() {}, nil
	}
	return o.AdmitPack()
}

func (l Limits) requestTimeout() time.Duration {
	switch {
	case l.RequestTimeout < 0:
		return 0
	case l.RequestTimeout == 0:
		return DefaultRequestTimeout
	}
	return l.RequestTimeout
}

// acquire waits for a negotiation slot, within the slots' queue bound;
// release must be called after. A request that found no slot in time
// gets a *BusyError.
func (l Limits) acquire(ctx context.Context) (release func(), err error) {
	s := l.Negotiations
	if s == nil {
		return func() {}, nil
	}
	if !s.sem.TryAcquire(1) {
		wctx := ctx
		if s.wait > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, s.wait)
			defer cancel()
		}
		if err := s.sem.Acquire(wctx, 1); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("wait for a negotiation slot: %w", ctx.Err())
			}
			return nil, &BusyError{Slots: s.n, Wait: s.wait}
		}
	}
	var once sync.Once
	return func() { once.Do(func() { s.sem.Release(1) }) }, nil
}

// BusyError refuses a request that queued for a negotiation slot for
// longer than the queue bound. Its text is the line the client prints;
// it wraps ErrBusy, which front ends answer with 503 and Retry-After.
type BusyError struct {
	Slots int
	Wait  time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("server busy: all %d fetch negotiation slots stayed taken for %s (set %s, %s)",
		e.Slots, e.Wait, SettingMaxNegotiations, SettingNegotiationWait)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Settings that raise the limits, named in the errors clients see. The
// server configuration (transport/node/config) reads them.
const (
	SettingMaxPushRefs    = "RGIT_MAX_PUSH_REFS"
	SettingMaxPushOptions = "RGIT_MAX_PUSH_OPTIONS"
	SettingMaxObjectSize  = "RGIT_MAX_OBJECT_SIZE"
	SettingMaxDeltaDepth  = "RGIT_MAX_DELTA_DEPTH"
	SettingMaxPackSize    = "RGIT_MAX_PACK_SIZE"
	SettingMaxWants       = "RGIT_MAX_WANTS"
	SettingMaxHaves       = "RGIT_MAX_HAVES"
	SettingMaxArgBytes    = "RGIT_MAX_ARG_BYTES"
	// The node's negotiation slots, their queue bound, and the whole
	// request deadline.
	SettingMaxNegotiations = "RGIT_MAX_NEGOTIATIONS"
	SettingNegotiationWait = "RGIT_NEGOTIATION_WAIT_SECS"
	SettingRequestTimeout  = "RGIT_REQUEST_SECS"
)

// LimitError is a request refused for exceeding a limit. Its text is the
// line the client prints: what was exceeded, the limit and the setting
// that raises it, e.g. "too many have lines (limit 200000, set
// RGIT_MAX_HAVES)", or "fixed" for a limit no setting raises. It wraps
// ErrProtocol: the request is at fault, not the server.
type LimitError struct {
	What    string // "too many have lines"
	Limit   int64
	Unit    string // "" for counts, "bytes"
	Setting string // the RGIT_* variable that raises Limit; "" if fixed
	Hint    string // what to do instead, after the limit; "" for none
}

func (e *LimitError) Error() string {
	unit := ""
	if e.Unit != "" {
		unit = " " + e.Unit
	}
	setting := "fixed"
	if e.Setting != "" {
		setting = "set " + e.Setting
	}
	hint := ""
	if e.Hint != "" {
		hint = "; " + e.Hint
	}
	return fmt.Sprintf("%s (limit %d%s, %s)%s", e.What, e.Limit, unit, setting, hint)
}

// Is makes errors.Is(err, ErrProtocol) true.
func (e *LimitError) Is(target error) bool { return target == ErrProtocol }

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// ErrProtocol is wrapped by every error caused by the client's request
// (malformed pkt-lines, unknown commands, bad wants, bad ref names in
// commands). The message has already been sent to the client when the
// stream allowed it; front ends log it and may answer 4xx if nothing was
// written yet.
var ErrProtocol = errors.New("git protocol error")

// ErrBusy is wrapped by errors that refuse work because the server is
// out of capacity (memory admission). Its text reaches the client as
// "ERR server busy"; front ends answer 503 with Retry-After when nothing
// was written yet.
var ErrBusy = errors.New("server busy")

// ErrNotOurRef is wrapped by Backend.CheckWants errors for a want that is
// not reachable from any advertised ref. Use NotOurRefError to name the id.
var ErrNotOurRef = errors.New("not our ref")

// NotOurRefError names a want that is not a ref tip or reachable from one.
type NotOurRefError struct{ ID object.ID }

func (e *NotOurRefError) Error() string { return "not our ref " + e.ID.String() }

// Is makes errors.Is(err, ErrNotOurRef) true.
func (e *NotOurRefError) Is(target error) bool { return target == ErrNotOurRef }

// ParseProtocol extracts the protocol version from a Git-Protocol header or
// GIT_PROTOCOL value: colon-separated key[=value] entries, of which
// "version=N" matters. The highest known version listed wins, as in git;
// anything unknown or absent gives 0.
func ParseProtocol(header string) int {
	v := 0
	for _, kv := range strings.Split(header, ":") {
		val, ok := strings.CutPrefix(kv, "version=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 2 {
			continue
		}
		v = max(v, n)
	}
	return v
}
