package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// TestBadTokenBeforeOrigin: a bad token is 401 before the origin (a git
// node) or the cache is asked; a malformed path is 400 likewise.
func TestBadTokenBeforeOrigin(t *testing.T) {
	o := &fakeOrigin{}
	srv := newTestHandler(t, nil, o)
	for _, c := range []struct {
		auth, path string
		code       int
	}{
		{"Bearer rgit_unknown", treePath, http.StatusUnauthorized},
		{"Basic eDpyZ2l0X3Vua25vd24=", treePath, http.StatusUnauthorized}, // x:rgit_unknown
		{"Basic !!!", treePath, http.StatusUnauthorized},
		{"", "/api/alice/site/tree/" + oidA + "/..", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Errorf("%q %s: %d %v", c.auth, c.path, resp.StatusCode, resp.Header)
		}
	}
	if n := o.calls.Load(); n != 0 {
		t.Errorf("the origin was asked %d times", n)
	}
	resp, err := http.Post(srv.URL+treePath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// TestLimitUnauthenticated: requests without credentials hold a unit of
// the per-address cap while they run (RGIT_MAX_ANON_PER_ADDR, shared
// with git); over it the API answers 429 with Retry-After and the
// documented message before the origin is asked. A request with
// credentials holds nothing: a bad one is 401 even while the cap is full.
func TestLimitUnauthenticated(t *testing.T) {
	o := &fakeOrigin{entered: make(chan struct{}), gate: make(chan struct{})}
	h, err := New(Config{Auth: noTokens{}, Origin: o})
	if err != nil {
		t.Fatal(err)
	}
	anon := clientlimit.NewPerAddr(1, "RGIT_MAX_ANON_PER_ADDR")
	// returned is sent to once the limiter's handler has returned (its
	// unit is released then, after the client may already have read the
	// answer).
	returned := make(chan struct{}, 4)
	limited := LimitUnauthenticated(anon, h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limited.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	get := func(authz string) (int, http.Header, errorBody) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+treePath, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil, errorBody{}
		}
		defer resp.Body.Close()
		var e errorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, resp.Header, e
	}
	done := make(chan int)
	go func() {
		code, _, _ := get("")
		done <- code
	}()
	<-o.entered
	t.Cleanup(func() { close(o.gate) })
	const want = "too many unauthenticated connections from your address (limit 1, set RGIT_MAX_ANON_PER_ADDR)"
	if code, hdr, e := get(""); code != http.StatusTooManyRequests || e.Error != want || hdr.Get("Retry-After") == "" {
		t.Errorf("second anonymous request: %d %q (Retry-After %q), want 429 %q", code, e.Error, hdr.Get("Retry-After"), want)
	}
	if code, _, _ := get("Bearer rgit_unknown"); code != http.StatusUnauthorized {
		t.Errorf("request with a bad token while the cap is full: %d, want 401", code)
	}
	if n := o.calls.Load(); n != 1 {
		t.Errorf("the origin was asked %d times, want once", n)
	}
	o.gate <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first anonymous request: %d", code)
	}
	for range 3 { // the three requests' handlers
		<-returned
	}
	if n := anon.Held("127.0.0.1"); n != 0 {
		t.Errorf("%d units held after the request ended", n)
	}
}
