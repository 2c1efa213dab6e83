package gitserve

import (
	"context"
	"errors"
	"net/http"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Class is the client-visible kind of a session outcome. HTTP maps it to a
// status code, SSH to a message and exit status, metrics to a label.
type Class int

const (
	OK Class = iota
	// Unauthorized: anonymous caller; credentials could help (HTTP 401).
	Unauthorized
	// NotFound: missing, or hidden from this caller (HTTP 404).
	NotFound
	// Forbidden: visible but not allowed (HTTP 403).
	Forbidden
	// BadRequest: the client broke the protocol (HTTP 400).
	BadRequest
	// TooLarge: the request body exceeded the limit (HTTP 413).
	TooLarge
	// Unavailable: try again later (HTTP 503).
	Unavailable
	// Canceled: the client went away or the server is shutting down.
	Canceled
	// Internal: a server-side failure (HTTP 500).
	Internal
)

var classNames = [...]string{"ok", "unauthorized", "not_found", "forbidden", "bad_request", "too_large", "unavailable", "canceled", "internal"}

// String is a short label, used in metrics and logs.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// Classify maps an error from Open, Run or a front end to its Class.
func Classify(err error) Class {
	var denied *DeniedError
	var tooLarge *http.MaxBytesError
	var remote *RemoteError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &remote):
		return remote.Class
	case errors.As(err, &denied):
		switch denied.Decision {
		case auth.Unauthorized:
			return Unauthorized
		case auth.Forbidden:
			return Forbidden
		default:
			return NotFound
		}
	case errors.As(err, &tooLarge):
		return TooLarge
	case errors.Is(err, gitproto.ErrProtocol):
		return BadRequest
	case errors.Is(err, ErrUnavailable), errors.Is(err, gitproto.ErrBusy), errors.Is(err, objstore.ErrUnavailable),
		errors.Is(err, packcache.ErrDiskFull):
		return Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	}
	return Internal
}

// Message is the short text shown to clients (HTTP body, SSH stderr after
// "ERROR: "). It never includes error details, which may name private
// repositories or internal hosts; those go to the log.
func (c Class) Message() string {
	switch c {
	case OK:
		return "ok"
	case Unauthorized, NotFound:
		// Same text for both, so the message reveals no more than the
		// decision does.
		return "repository not found (or you are not authorized to access it)"
	case Forbidden:
		return "permission denied: you may read this repository but not change it"
	case BadRequest:
		return "malformed git protocol request"
	case TooLarge:
		return "request body too large"
	case Unavailable:
		return "repository temporarily unavailable, try again"
	case Canceled:
		return "request canceled"
	}
	return "internal server error"
}

// ClientMessage is the text a client is shown for err: the Message of its
// class, made specific where that tells the caller only about their own
// credential: that their token expired or was revoked (not that a
// repository is missing), or what limits the token or deploy key whose
// push was refused.
func ClientMessage(err error) string {
	switch {
	case errors.Is(err, objstore.ErrUnavailable):
		return StoreUnavailable
	case errors.Is(err, packcache.ErrDiskFull):
		return CacheDiskFull
	}
	var denied *DeniedError
	if errors.As(err, &denied) {
		if m := denied.clientMessage(); m != "" {
			return m
		}
	}
	return Classify(err).Message()
}

// clientMessage is ClientMessage for a denial, "" for the class's own.
func (e *DeniedError) clientMessage() string {
	id := e.Identity
	switch e.Decision {
	case auth.Unauthorized:
		var te *auth.TokenError
		switch {
		case errors.As(e.Err, &te):
			return "authentication failed: the " + te.Error()
		case errors.Is(e.Err, auth.ErrBadCredentials):
			return "authentication failed: the password is not a valid rgit token (tokens start with " + auth.TokenPrefix + ")"
		}
	case auth.Forbidden:
		switch {
		case id.DeployKey != "" && id.ReadOnly:
			return "permission denied: deploy key " + id.DeployKey + " is read-only (it was added without --write)"
		case id.ReadOnly:
			return "permission denied: this token has scope read, which cannot push (a token with scope write can)"
		}
	}
	return ""
}

// StoreUnavailable is what a client is told when the object store
// failed its request: the cause, and that retrying later helps.
const StoreUnavailable = "object store unavailable (not answering in time, refusing or throttling); try again later"

// CacheDiskFull is what a client is told when a node's local pack cache
// disk had no room for what its request needed.
const CacheDiskFull = "the server's local disk (pack cache) is full; try again later"

// ParseClass is the inverse of Class.String; unknown labels are Internal.
func ParseClass(s string) Class {
	for i, n := range classNames {
		if n == s {
			return Class(i)
		}
	}
	return Internal
}
