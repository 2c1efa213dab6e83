package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// ErrCommand reports that the node ran the command and it failed; the
// message is the node's. The error is a *CommandError.
var ErrCommand = errors.New("admin command failed")

// Sentinel errors of reaching the node.
var (
	// ErrUnreachable: no connection to the node.
	ErrUnreachable = errors.New("node unreachable")
	// ErrRefused: the node refused the request itself (bad secret).
	ErrRefused = errors.New("refused by node")
)

// CommandError is a command's failure as the node reported it.
type CommandError struct {
	Code string // CodeNotFound, CodeRefused, …; empty from older nodes
	Msg  string
}

func (e *CommandError) Error() string { return ErrCommand.Error() + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrCommand) true.
func (e *CommandError) Unwrap() error { return ErrCommand }

// Call sends m to the node at addr and streams its answer: progress lines
// to progress, the reply's text to out.
func Call(ctx context.Context, addr, secret string, m Msg, progress, out io.Writer) error {
	r, err := Do(ctx, addr, nil, secret, m, progress)
	if err == nil && r.Text() != "" {
		fmt.Fprintln(out, r.Text())
	}
	return err
}

// Do sends m in a peer envelope to the node at addr, over peer TLS when tc
// is set, streams progress lines to progress (nil: dropped) and returns
// m's typed reply. A failed command is a *CommandError.
func Do(ctx context.Context, addr string, tc *peertls.Config, secret string, m Msg, progress io.Writer) (Result, error) {
	_, r := m.op()
	hc, scheme := streamClient(tc)
	err := peer.SendProgress(ctx, hc, scheme+"://"+addr, secret, 0, m, r, func(line string) {
		if progress != nil {
			fmt.Fprintln(progress, line)
		}
	})
	var (
		coded   *peer.CodedError
		refused *peer.RefusedError
	)
	switch {
	case err == nil:
		return r, nil
	case errors.As(err, &coded):
		return nil, &CommandError{Code: coded.Code, Msg: coded.Msg}
	case errors.As(err, &refused):
		// The secret check (401), or a node that does not know m.
		return nil, fmt.Errorf("rgit node at %s: %w: %w", addr, ErrRefused, err)
	}
	return nil, fmt.Errorf("reach rgit node at %s (is `rgit serve` running? set RGIT_ADMIN_ADDR or --addr): %w: %w", addr, ErrUnreachable, err)
}

// streamClient returns the HTTP client and URL scheme for a node's peer
// stream port. With TLS the client is made per call and keeps no idle
// connections: admin commands are rare.
func streamClient(tc *peertls.Config) (*http.Client, string) {
	if tc == nil {
		return http.DefaultClient, "http"
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc.Client, DisableKeepAlives: true}}, "https"
}

// Exit statuses of rgit-admin, for scripts (docs/operations.md documents them).
const (
	ExitOK          = 0
	ExitNotFound    = 1
	ExitUsage       = 2
	ExitRefused     = 3
	ExitUnreachable = 4
	ExitFailed      = 5
)

// ErrorCode classifies an error of Do or Parse as a Code* string.
func ErrorCode(err error) string {
	var ce *CommandError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce) && ce.Code != "":
		return ce.Code
	case errors.Is(err, ErrUnreachable):
		return CodeUnreachable
	case errors.Is(err, ErrRefused):
		return CodeRefused
	}
	return CodeFailed
}

// ExitCode is rgit-admin's exit status for an error of Do.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	switch ErrorCode(err) {
	case CodeNotFound:
		return ExitNotFound
	case CodeUsage:
		return ExitUsage
	case CodeRefused:
		return ExitRefused
	case CodeUnreachable:
		return ExitUnreachable
	}
	return ExitFailed
}
