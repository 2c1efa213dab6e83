package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// The read API is an http.Handler answering /api/… paths: the node's own
// API handler in process, or Upstream for a separate API tier. The page
// adds only the caller's token to what it asks.

// Upstream is the read API at base (e.g. http://rgit-api:8090), for a page
// served away from the API. Answers stream back unchanged.
func Upstream(base *url.URL) http.Handler {
	return &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(base)
		pr.Out.Host = base.Host
	}}
}

// maxAnswer bounds a JSON answer the page reads: the API caps blobs at
// 1 MiB (base64 for binary) and diffs at 4 MiB, and JSON escaping can
// nearly double text.
const maxAnswer = 16 << 20

// errAnswerTooLarge is an API answer over maxAnswer.
var errAnswerTooLarge = errors.New("read API answer too large")

// apiError is a non-2xx answer of the read API.
type apiError struct {
	Status     int
	Msg        string
	RetryAfter string // the answer's Retry-After (a busy node)
}

func (e *apiError) Error() string { return fmt.Sprintf("read API: %d %s", e.Status, e.Msg) }

// apiMessage is the message of an API failure ("" if err is not one).
func apiMessage(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Msg
	}
	return ""
}

// retryAfterOf is the Retry-After of an API failure ("" if none).
func retryAfterOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return ""
}

// statusOf is the HTTP status of an API failure (0 if err is not one).
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// apiRequest is a GET or HEAD (method) of path (already escaped,
// starting with /api/) as the caller with token (empty: anonymous).
func apiRequest(ctx context.Context, method, path, token string) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, method, "http://api.internal"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("read API request %q: %w", path, err)
	}
	r.RequestURI = path
	r.RemoteAddr = "127.0.0.1:0"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r, nil
}

// getJSON asks api for path as the caller and decodes the answer into v.
// A non-2xx answer is an *apiError carrying the API's status and message.
func getJSON(ctx context.Context, api http.Handler, path, token string, v any) (http.Header, error) {
	r, err := apiRequest(ctx, http.MethodGet, path, token)
	if err != nil {
		return nil, err
	}
	rec := &recorder{header: http.Header{}}
	api.ServeHTTP(rec, r)
	if rec.overflow {
		return nil, fmt.Errorf("%s: %w", path, errAnswerTooLarge)
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status < 200 || rec.status > 299 {
		return rec.header, &apiError{Status: rec.status, Msg: errorMessage(rec.status, rec.body.Bytes()), RetryAfter: rec.header.Get("Retry-After")}
	}
	if err := json.Unmarshal(rec.body.Bytes(), v); err != nil {
		return rec.header, fmt.Errorf("read API %s: decode: %w", path, err)
	}
	return rec.header, nil
}

// headOK asks api for path with HEAD as the caller: only the checks the
// answer's status needs run there (no diff or log is computed). A non-2xx
// answer is an *apiError.
func headOK(ctx context.Context, api http.Handler, path, token string) error {
	r, err := apiRequest(ctx, http.MethodHead, path, token)
	if err != nil {
		return err
	}
	rec := &recorder{header: http.Header{}}
	api.ServeHTTP(rec, r)
	if rec.status != 0 && (rec.status < 200 || rec.status > 299) {
		return &apiError{Status: rec.status, Msg: errorMessage(rec.status, rec.body.Bytes()), RetryAfter: rec.header.Get("Retry-After")}
	}
	return nil
}

// errorMessage is the message of an API error answer: its JSON "error",
// else the status text.
func errorMessage(status int, body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return http.StatusText(status)
	}
	return e.Error
}

// recorder collects an in-process answer, up to maxAnswer bytes.
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	overflow bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(p) > maxAnswer {
		r.overflow = true
		return 0, errAnswerTooLarge
	}
	return r.body.Write(p)
}

// apiPath builds /api/{owner}/{name}/{op}/… with every segment escaped
// once. rest segments are joined with "/" after escaping each.
func apiPath(owner, name, op string, rest ...string) string {
	var b strings.Builder
	b.WriteString("/api/")
	b.WriteString(url.PathEscape(owner))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(name))
	b.WriteByte('/')
	b.WriteString(op)
	for _, s := range rest {
		if s == "" {
			continue
		}
		b.WriteByte('/')
		b.WriteString(escapePath(s))
	}
	return b.String()
}

// escapePath escapes each "/"-separated segment of p.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
