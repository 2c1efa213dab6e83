package gitproto

import (
	"errors"

	"github.com/rgit/rgit/storage/object"
	"strconv"
	"strings"
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
	// MaxPushOptions caps the number of push options (DefaultMaxPushOptions
	// when 0); more is a protocol error.
	MaxPushOptions int
	// MaxCommands caps the number of ref update commands in one push
	// (DefaultMaxCommands when 0).
	MaxCommands int
	// MaxWants caps wants and haves per request (DefaultMaxWants when 0),
	// so a hostile client cannot make the server buffer unbounded lists.
	MaxWants int
}

// Defaults for the zero values of Options.
const (
	DefaultAgent          = "rgit/0.1"
	DefaultMaxPushOptions = 32
	DefaultMaxCommands    = 10000
	DefaultMaxWants       = 1 << 20
	// maxPushOptionLen bounds one push option; the pkt-line limit bounds it
	// anyway, this keeps the total small.
	maxPushOptionLen = 4096
)

func (o Options) agent() string {
	if o.Agent == "" {
		return DefaultAgent
	}
	return o.Agent
}

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
