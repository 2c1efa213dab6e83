package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
)

func TestRequireSecret(t *testing.T) {
	const secret = "0123456789abcdef0123"
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	cases := []struct {
		name, secret, header string
		want                 int
	}{
		{"right secret", secret, "Bearer " + secret, http.StatusTeapot},
		{"no header", secret, "", http.StatusUnauthorized},
		{"wrong secret", secret, "Bearer wrong", http.StatusUnauthorized},
		{"prefix of secret", secret, "Bearer " + secret[:5], http.StatusUnauthorized},
		{"not bearer", secret, "Basic " + secret, http.StatusUnauthorized},
		{"empty secret configured", "", "Bearer ", http.StatusUnauthorized},
	}
	for _, c := range cases {
		h := RequireSecret(c.secret, zap.NewNop(), inner)
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, rec.Code, c.want)
		}
	}
}
