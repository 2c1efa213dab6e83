package api

import (
	"net/http"
	"testing"
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
