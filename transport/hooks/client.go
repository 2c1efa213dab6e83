package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/rgit/rgit/storage/outbox"
)

// Bounds of one delivery attempt.
const (
	// maxConnect bounds connecting (and the TLS handshake); the attempt's
	// whole time is Config.Timeout.
	maxConnect = 5 * time.Second
	// maxAnswer is how much of a receiver's answer is read: the status is
	// what counts, and a receiver must not make the node read without end.
	maxAnswer = 64 << 10
	// MaxURL bounds a hook's URL.
	MaxURL = 2048
	// userAgent names rgit to receivers.
	userAgent = "rgit-hookshot/1"
)

// ErrBadURL: a hook's URL is not an absolute http(s) URL rgit will send to.
var ErrBadURL = errors.New("bad webhook URL")

// CheckURL validates a hook's URL: absolute http or https with a host, no
// user name or password in it (it is shown by list-hooks; the secret is
// how receivers authenticate rgit), at most MaxURL bytes. Where the host
// resolves is checked when delivering (Guard).
func CheckURL(raw string) error {
	if len(raw) > MaxURL {
		return fmt.Errorf("%w: too long (limit %d bytes, fixed)", ErrBadURL, MaxURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: %q: the scheme must be http or https", ErrBadURL, raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%w: %q has no host", ErrBadURL, raw)
	case u.User != nil:
		return fmt.Errorf("%w: %q: no user or password in the URL (receivers check the signature instead)", ErrBadURL, raw)
	case u.Fragment != "":
		return fmt.Errorf("%w: %q: no fragment", ErrBadURL, raw)
	}
	return nil
}

// Signature is the X-Hub-Signature-256 value of body signed with secret:
// "sha256=" and the hex HMAC-SHA256, as GitHub sends it, so receivers'
// existing verification code works.
func Signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// newClient is the HTTP client deliveries use: connections only to
// addresses g allows (checked after resolving), no proxy, no redirects,
// bounded connect and total time.
func newClient(g Guard, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: min(maxConnect, timeout), Control: g.control}
	t := &http.Transport{
		Proxy:                 nil, // a proxy would connect for us, past the guard
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   min(maxConnect, timeout),
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport:     t,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// send posts body to h as event kind, delivery id, and returns the
// attempt: status, duration and, for anything but a 2xx answer read to
// its end (at most maxAnswer), why it failed.
func send(ctx context.Context, c *http.Client, h outbox.Hook, kind, id string, body []byte) outbox.Attempt {
	start := time.Now()
	a := outbox.Attempt{At: start.UTC()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("X-Rgit-Event", kind)
	req.Header.Set("X-Rgit-Delivery", id)
	req.Header.Set("X-Rgit-Hook-ID", h.ID)
	req.Header.Set("X-Hub-Signature-256", Signature(h.Secret, body))
	resp, err := c.Do(req)
	if err != nil {
		a.Millis, a.Error = time.Since(start).Milliseconds(), attemptError(err)
		return a
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	a.Millis = time.Since(start).Milliseconds()
	switch {
	case err != nil && a.OK():
		a.Error = "answer cut off: " + attemptError(err)
	case a.Status >= 300 && a.Status < 400:
		a.Error = fmt.Sprintf("HTTP %d: redirects are not followed (location %q)", a.Status, resp.Header.Get("Location"))
	case !a.OK():
		a.Error = fmt.Sprintf("HTTP %d", a.Status)
	}
	return a
}

// attemptError describes a failed request without the URL (which the
// listing shows anyway), timeouts named as such.
func attemptError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return "timeout: " + err.Error()
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maxSecret bounds a hook's secret.
const maxSecret = 256

// NewHook is the hook add-hook adds: its URL checked, its events parsed
// (outbox.ParseEvents), and its secret: the one given, or a new random
// one when secret is empty (generated reports it: shown once, never
// again).
func NewHook(rawURL, secret, events, createdBy string, now time.Time) (h outbox.Hook, generated bool, err error) {
	if err := CheckURL(rawURL); err != nil {
		return h, false, err
	}
	evs, err := outbox.ParseEvents(events)
	if err != nil {
		return h, false, err
	}
	if len(secret) > maxSecret {
		return h, false, fmt.Errorf("%w: too long (limit %d bytes, fixed)", ErrBadSecret, maxSecret)
	}
	if secret == "" {
		var b [32]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
		secret, generated = hex.EncodeToString(b[:]), true
	}
	return outbox.Hook{ID: outbox.NewHookID(), URL: rawURL, Secret: secret, Events: evs, CreatedBy: createdBy, Created: now.UTC()}, generated, nil
}

// ErrBadSecret: a hook's secret is unusable.
var ErrBadSecret = errors.New("bad webhook secret")
