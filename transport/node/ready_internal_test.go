package node

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

// TestReadinessBoundsChecks: /ready runs its check at most once per
// interval and never twice at once; callers meanwhile get the last
// outcome at once instead of waiting (or starting checks of their own).
// The interval passes in synctest's fake time.
func TestReadinessBoundsChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := 0
		started, release := make(chan struct{}), make(chan struct{})
		var result error
		rd := newReadiness(time.Hour, zap.NewNop(), func(context.Context) error {
			checks++
			if checks == 1 {
				close(started)
				<-release
			}
			return result
		})
		ask := func() (int, string) {
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, httptest.NewRequest("GET", "/ready", nil))
			return w.Code, w.Body.String()
		}
		first := make(chan int)
		go func() { code, _ := ask(); first <- code }()
		<-started
		// While the first check runs: no second check, an answer at once.
		if code, body := ask(); code != http.StatusServiceUnavailable || !strings.Contains(body, "first check running") {
			t.Fatalf("during the first check: %d %q", code, body)
		}
		close(release)
		if code := <-first; code != http.StatusOK {
			t.Fatalf("first check: %d", code)
		}
		result = errNoUpstream
		for range 50 {
			if code, _ := ask(); code != http.StatusOK {
				t.Fatalf("within the interval the last outcome (ready) is answered, got %d", code)
			}
		}
		if checks != 1 {
			t.Fatalf("%d checks within one interval, want 1", checks)
		}
		time.Sleep(time.Hour) // the interval passes (fake time)
		if code, body := ask(); code != http.StatusServiceUnavailable || !strings.Contains(body, "RGIT_UPSTREAM") || !errors.Is(rd.err, errNoUpstream) {
			t.Fatalf("after the interval with the fleet gone: %d %q", code, body)
		}
	})
}
