package outage

import (
	"strings"
	"testing"
	"time"
)

func TestStoreRequests(t *testing.T) {
	page := `# HELP rgit_store_requests_total Object-store requests by operation and result.
# TYPE rgit_store_requests_total counter
rgit_store_requests_total{op="get",result="answered"} 7
rgit_store_requests_total{op="put",result="answered"} 2
rgit_store_requests_total{op="put",result="timeout"} 3
rgit_store_requests_total{op="head",result="failed_fast"} 40
rgit_store_state{state="down"} 1
`
	got, err := StoreRequests(page)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"answered": 9, "timeout": 3, "failed_fast": 40}
	if len(got) != len(want) {
		t.Fatalf("StoreRequests = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("StoreRequests[%s] = %d, want %d", k, got[k], v)
		}
	}
	if _, err := StoreRequests(`rgit_store_requests_total{op="get"} 1` + "\n"); err == nil {
		t.Error("a series without a result label was accepted")
	}
}

func TestLine(t *testing.T) {
	r := Result{Case: "hang", Served: 5, PushFail: 1500 * time.Millisecond, ColdStatus: 503, HealthzCode: 200, ReadyCode: 200,
		StatusStore: "down", StoreRequests: 4, FailedFast: 17, ByResult: map[string]int{"timeout": 4, "failed_fast": 17}, Recover: 550 * time.Millisecond}
	line := r.Line()
	for _, f := range []string{"outage case=hang ", " served=5 ", " failed=0 ", " push_fail_s=1.50 ", " store_requests=4 ",
		" by_result=failed_fast:17,timeout:4 ", " recover_s=0.55 ", " lost=0"} {
		if !strings.Contains(line, f) {
			t.Errorf("line %q lacks %q", line, f)
		}
	}
}
