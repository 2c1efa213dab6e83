package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
)

type httpErr struct {
	status int
	code   string
}

func (e httpErr) Error() string       { return fmt.Sprintf("%d %s", e.status, e.code) }
func (e httpErr) HTTPStatusCode() int { return e.status }
func (e httpErr) ErrorCode() string   { return e.code }

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name               string
		err                error
		stalled, callerEnd bool
		want               Kind
	}{
		{"ok", nil, false, false, Answered},
		{"not found", fmt.Errorf("get: %w", objstore.ErrNotFound), false, false, Answered},
		{"exists", objstore.ErrExists, false, false, Answered},
		{"bad key", objstore.ErrInvalidKey, false, false, Answered},
		{"403 is an answer", httpErr{403, "AccessDenied"}, false, false, Answered},
		{"503 SlowDown", fmt.Errorf("put: %w", httpErr{503, "SlowDown"}), false, false, Throttled},
		{"429", httpErr{429, ""}, false, false, Throttled},
		{"500", httpErr{500, "InternalError"}, false, false, ServerError},
		{"refused", fmt.Errorf("send: %w", refused), false, false, Refused},
		{"reset", syscall.ECONNRESET, false, false, Refused},
		{"our deadline", context.Canceled, true, false, Timeout},
		{"our deadline wins over the caller's", context.Canceled, true, true, Timeout},
		{"caller gone", context.Canceled, false, true, Abandoned},
		{"net timeout", netTimeout{}, false, false, Timeout},
		{"whole-request timeout", context.DeadlineExceeded, false, false, Timeout},
		{"unknown", errors.New("EOF"), false, false, Failed},
	} {
		if got := Classify(tc.err, tc.stalled, tc.callerEnd); got != tc.want {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.want)
		}
	}
}
