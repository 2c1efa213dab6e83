package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/rgit/rgit/transport/peertls"
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

// Call sends req to the node at addr and streams its answer: progress lines
// to progress, the command's output to out.
func Call(ctx context.Context, addr, secret string, req Request, progress, out io.Writer) error {
	ev, err := Do(ctx, addr, nil, secret, req, progress)
	if err == nil && ev.Output != "" {
		fmt.Fprintln(out, ev.Output)
	}
	return err
}

// Do sends req to the node at addr, over peer TLS when tc is set, streams
// progress lines to progress and returns the final event: on success its
// Output and, for structured commands, Data; a failed command is a
// *CommandError.
func Do(ctx context.Context, addr string, tc *peertls.Config, secret string, req Request, progress io.Writer) (Event, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Event{}, err
	}
	hc, scheme := streamClient(tc)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+Path, bytes.NewReader(body))
	if err != nil {
		return Event{}, fmt.Errorf("admin address %q: %w", addr, err)
	}
	hr.Header.Set("Authorization", "Bearer "+secret)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		return Event{}, fmt.Errorf("reach rgit node at %s (is `rgit serve` running? set RGIT_ADMIN_ADDR or --addr): %w: %w", addr, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("rgit node at %s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			err = fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return Event{}, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return Event{}, fmt.Errorf("bad answer from node: %w", err)
		}
		if ev.Progress != "" {
			fmt.Fprintln(progress, ev.Progress)
		}
		if ev.Done {
			if ev.Error != "" {
				return ev, &CommandError{Code: ev.Code, Msg: ev.Error}
			}
			return ev, nil
		}
	}
	if err := sc.Err(); err != nil {
		return Event{}, fmt.Errorf("read answer from node: %w: %w", ErrUnreachable, err)
	}
	return Event{}, fmt.Errorf("node closed the connection before answering: %w", ErrUnreachable)
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

// Exit statuses of rgit-admin, for scripts (README documents them).
const (
	ExitOK          = 0
	ExitNotFound    = 1
	ExitUsage       = 2
	ExitRefused     = 3
	ExitUnreachable = 4
	ExitFailed      = 5
)

// ErrorCode classifies an error of Do as a Code* string.
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

// Usage returns one synopsis line per command, sorted.
func Usage() []string {
	var lines []string
	for name, c := range commands {
		lines = append(lines, name+" "+c.synopsis)
	}
	sort.Strings(lines)
	return lines
}
