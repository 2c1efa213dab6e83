package guard

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/rgit/rgit/storage/objstore"
)

// Kind is what became of one store request.
type Kind uint8

const (
	// Answered: the store answered (success, not found, exists, or a
	// refusal of the request itself such as 403): it is up.
	Answered Kind = iota
	// Timeout: no answer within the operation deadline
	// (RGIT_STORE_OP_TIMEOUT_MS), or a network timeout.
	Timeout
	// Refused: the connection was refused or reset.
	Refused
	// Throttled: the store asked us to slow down (503 SlowDown, 429).
	Throttled
	// ServerError: another 5xx answer.
	ServerError
	// Failed: any other failure to get an answer.
	Failed
	// Abandoned: the caller gave up (its context ended) before an answer;
	// it says nothing about the store.
	Abandoned
	// FailedFast: not sent, the store being Down (see Admit).
	FailedFast
)

var kindNames = [...]string{Answered: "answered", Timeout: "timeout", Refused: "refused", Throttled: "throttled",
	ServerError: "server_error", Failed: "failed", Abandoned: "abandoned", FailedFast: "failed_fast"}

func (k Kind) String() string { return kindNames[k] }

// Kinds lists every kind (metrics export one series each).
var Kinds = []Kind{Answered, Timeout, Refused, Throttled, ServerError, Failed, Abandoned, FailedFast}

// Fault reports whether k counts against the store's health.
func (k Kind) Fault() bool {
	switch k {
	case Timeout, Refused, Throttled, ServerError, Failed:
		return true
	}
	return false
}

// statusCoder is what HTTP-speaking backends' errors carry (the AWS SDK's
// ResponseError among them).
type statusCoder interface{ HTTPStatusCode() int }

// errorCoder is an API error code (the AWS SDK's smithy.APIError).
type errorCoder interface{ ErrorCode() string }

// Classify decides the Kind of a request's outcome. stalled says the
// operation deadline ended it; callerDone that the caller's own context
// had ended.
func Classify(err error, stalled, callerDone bool) Kind {
	var sc statusCoder
	var ec errorCoder
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, objstore.ErrNotFound), errors.Is(err, objstore.ErrExists),
		errors.Is(err, objstore.ErrInvalidKey), errors.Is(err, objstore.ErrInvalidRange):
		return Answered
	case stalled:
		return Timeout
	case callerDone:
		return Abandoned
	case errors.As(err, &ec) && isThrottleCode(ec.ErrorCode()):
		return Throttled
	case errors.As(err, &sc) && sc.HTTPStatusCode() > 0:
		switch code := sc.HTTPStatusCode(); {
		case code == 429 || code == 503:
			return Throttled
		case code >= 500:
			return ServerError
		}
		return Answered
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return Refused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	}
	return Failed
}

func isThrottleCode(code string) bool {
	switch code {
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "ServiceUnavailable":
		return true
	}
	return false
}
