package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/peer"
)

// Upstream answers read-API requests by asking the git fleet's peer
// service (rgit api-serve): the request goes to any node's peer HTTP
// port with the peer secret, and that node routes it to the repository's
// owner like a git request. The caller's Authorization goes along, so the
// owner applies the access rules itself.
type Upstream struct {
	base   *url.URL
	secret string
	client *http.Client
	log    *zap.Logger
}

// NewUpstream returns an Upstream for the peer service at base
// (RGIT_UPSTREAM, e.g. http://rgit:8081).
func NewUpstream(base, secret string, tlsCfg *tls.Config, log *zap.Logger) (*Upstream, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %q: want http://host:port", base)
	}
	if secret == "" {
		return nil, errors.New("upstream: the peer secret is required")
	}
	if (tlsCfg != nil) != (u.Scheme == "https") {
		return nil, fmt.Errorf("upstream %q: peer TLS (RGIT_PEER_TLS_*) and an https:// URL go together", base)
	}
	if log == nil {
		log = zap.NewNop()
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSClientConfig:     tlsCfg,
	}
	return &Upstream{base: u, secret: secret, client: &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, log: log}, nil
}

// Close drops idle connections.
func (u *Upstream) Close() { u.client.CloseIdleConnections() }

// Probe asks the peer service for path with the peer secret (a readiness
// check: a node answers and accepts the secret); nil on 200.
func (u *Upstream) Probe(ctx context.Context, path string) error {
	target := *u.base
	target.Path = strings.TrimSuffix(u.base.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(peer.HeaderSecret, u.secret)
	peer.SetVersion(req.Header)
	resp, err := u.client.Do(req)
	if err != nil {
		return fmt.Errorf("upstream %s: %w", u.base.Host, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream %s: %s answered %s", u.base.Host, path, resp.Status)
	}
	return nil
}

// passHeaders are the answer headers carried back to the client.
var passHeaders = []string{"Content-Type", "Content-Length", "Cache-Control", "ETag", "Link", "Vary",
	"Content-Disposition", "Content-Security-Policy", "X-Content-Type-Options", "WWW-Authenticate", "Retry-After"}

// ServeAPI implements Origin.
func (u *Upstream) ServeAPI(w http.ResponseWriter, r *http.Request, q *Request, _ auth.Identity) error {
	target := *u.base
	target.Path = strings.TrimSuffix(u.base.Path, "/")
	p, query, _ := strings.Cut(q.Path(), "?")
	target.RawPath = target.Path + p
	target.Path += mustUnescape(p)
	target.RawQuery = query
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		u.log.Error("read API: build upstream request", zap.Error(err))
		return nil
	}
	for _, k := range []string{"Authorization", "If-None-Match"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set(peer.HeaderSecret, u.secret)
	req.Header.Set(peer.HeaderHop, "1")
	peer.SetVersion(req.Header)
	resp, err := u.client.Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			u.log.Warn("read API: upstream unreachable", zap.String("upstream", u.base.Host), zap.Error(err))
			writeError(w, http.StatusBadGateway, "the git fleet cannot be reached")
		}
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		// The peer port refused our secret (a plain-text 401), not the
		// caller: a misconfiguration, not the caller's business.
		u.log.Error("read API: the fleet refused the peer secret (RGIT_PEER_SECRET differs?)", zap.String("upstream", u.base.Host))
		writeError(w, http.StatusBadGateway, "the git fleet refused this API server")
		return nil
	}
	h := w.Header()
	for _, k := range passHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	// The body's reader fails when the upstream stops short of its
	// Content-Length or its last chunk: the answer was cut.
	if _, err := io.Copy(flushWriter{w}, resp.Body); err != nil {
		if r.Context().Err() == nil {
			u.log.Warn("read API: upstream answer cut short", zap.String("path", r.URL.Path), zap.Error(err))
		}
		return fmt.Errorf("upstream answer cut short: %w", err)
	}
	return nil
}

// mustUnescape unescapes a path Request.Path built (always valid).
func mustUnescape(p string) string {
	s, err := url.PathUnescape(p)
	if err != nil {
		return p
	}
	return s
}

// flushWriter flushes after each write so archives stream through.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		_ = http.NewResponseController(f.w).Flush()
	}
	return n, err
}
