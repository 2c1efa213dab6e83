package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// parkingAPI is the stub API, except that an anonymous call (no
// Authorization, as the page calls it without a token cookie) announces
// itself on entered and waits for gate.
type parkingAPI struct {
	*stubAPI
	entered, gate chan struct{}
}

func (p parkingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		p.entered <- struct{}{}
		<-p.gate
	}
	p.stubAPI.ServeHTTP(w, r)
}

// TestLimitUnauthenticated: page requests without credentials hold a
// unit of the per-address cap while they run (RGIT_MAX_ANON_PER_ADDR,
// shared with git and the read API); over it the page answers 429 with
// Retry-After and the documented message before any view runs. A
// signed-in browser (token cookie) holds nothing and passes while the
// cap is full.
func TestLimitUnauthenticated(t *testing.T) {
	api := parkingAPI{stubAPI: newStubAPI(), entered: make(chan struct{}), gate: make(chan struct{})}
	h, err := New(Config{API: api})
	if err != nil {
		t.Fatal(err)
	}
	anon := clientlimit.NewPerAddr(1, "RGIT_MAX_ANON_PER_ADDR")
	srv := httptest.NewServer(h.LimitUnauthenticated(anon))
	t.Cleanup(srv.Close)
	get := func(token string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		if token != "" {
			req.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	done := make(chan int)
	go func() {
		code, _, _ := get("")
		done <- code
	}()
	<-api.entered
	t.Cleanup(func() { close(api.gate) })
	if n := anon.Held("127.0.0.1"); n != 1 {
		t.Errorf("the parked anonymous request holds %d units, want 1", n)
	}
	const want = "too many unauthenticated connections from your address (limit 1, set RGIT_MAX_ANON_PER_ADDR)"
	if code, hdr, body := get(""); code != http.StatusTooManyRequests || strings.TrimSpace(body) != want || hdr.Get("Retry-After") == "" {
		t.Errorf("second anonymous request: %d %q (Retry-After %q), want 429 %q", code, body, hdr.Get("Retry-After"), want)
	}
	if code, _, body := get("alice-token"); code != http.StatusOK || !strings.Contains(body, "alice/private") {
		t.Errorf("signed-in request while the cap is full: %d, want 200 with alice's list", code)
	}
	api.gate <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first anonymous request: %d", code)
	}
	if n := anon.Held("127.0.0.1"); n != 0 {
		t.Errorf("%d units held after the request ended", n)
	}
}
