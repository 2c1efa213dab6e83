package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		ss := make([]sample, len(tc.in))
		for i, x := range tc.in {
			ss[i].secs = x
		}
		if got := median(ss); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The lead's report parses these lines: keep the format exact. Every line
// names both sides; a line without a reference has no reference time and
// no ratio.
func TestResultLine(t *testing.T) {
	r := result{
		op: "clone", fixture: "large", cmp: cmpProcess,
		rgit:      []sample{{secs: 1.5, rssKB: 2048}, {secs: 1.25, rssKB: 4096}, {secs: 2}},
		git:       []sample{{secs: 0.5}, {secs: 0.5}, {secs: 0.75}},
		rgitRSSMB: peakMB([]sample{{rssKB: 2048}, {rssKB: 4096}}),
	}
	want := "bench op=clone fixture=large rgit_s=1.500 git_s=0.500 ratio=3.00 rgit_rss_mb=4 rgit=process ref=git-process"
	if got := r.line(); got != want {
		t.Fatalf("line = %q\nwant   %q", got, want)
	}
	re := regexp.MustCompile(`^bench op=\S+ fixture=\S+ rgit_s=\d+\.\d{3} git_s=\d+\.\d{3} ratio=\d+\.\d{2} rgit_rss_mb=\d+ rgit=\S+ ref=\S+$`)
	if zero := (result{op: "fetch", fixture: "small", cmp: cmpWarm}).line(); !re.MatchString(zero) {
		t.Errorf("line without samples %q does not match the format", zero)
	}
	direct := result{op: "forward-clone", fixture: "medium", cmp: comparison{rgit: "forwarded", ref: "rgit-direct", refField: "direct"},
		rgit: []sample{{secs: 1.1}}, git: []sample{{secs: 1}}}
	if got, want := direct.line(), "bench op=forward-clone fixture=medium rgit_s=1.100 direct_s=1.000 ratio=1.10 rgit_rss_mb=0 rgit=forwarded ref=rgit-direct"; got != want {
		t.Errorf("line = %q\nwant   %q", got, want)
	}
	hit := result{op: "http-clone", fixture: "small-file", labels: []string{"cache=hit"}, cmp: cmpHit, rgit: []sample{{secs: 0.25}}, rgitRSSMB: 40}
	if got, want := hit.line(), "bench op=http-clone fixture=small-file cache=hit rgit_s=0.250 rgit_rss_mb=40 rgit=cache-hit ref=none"; got != want {
		t.Errorf("line = %q\nwant   %q", got, want)
	}
}

func TestAPILine(t *testing.T) {
	if got, want := apiLine("tree", "large", "off", false, 0.5, []float64{2, 1, 3}, 900),
		"bench op=api-tree fixture=large cache=off rgit_ms=0.500 git_ms=2.000 ratio=0.250 rps=900 rgit=keepalive-server ref=git-process"; got != want {
		t.Errorf("apiLine = %q\nwant      %q", got, want)
	}
	if got, want := apiLine("tree", "large", "redis", true, 0.125, nil, 7000),
		"bench op=api-tree fixture=large cache=redis rgit_ms=0.125 rps=7000 rgit=cache-hit ref=none"; got != want {
		t.Errorf("apiLine = %q\nwant      %q", got, want)
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP x\nrgit_clone_packs_total{source=\"built\"} 2\nrgit_clone_packs_total{source=\"local\"} 7\nrgit_up 1\n"
	if v, ok, err := metricValue(text, clonePacksLocal); v != 7 || !ok || err != nil {
		t.Errorf("local = %v, %v, %v; want 7", v, ok, err)
	}
	if _, ok, _ := metricValue(text, "rgit_clone_packs_total"); ok {
		t.Error("a name without its labels matched a labelled sample")
	}
	if _, ok, err := metricValue("rgit_up x\n", "rgit_up"); !ok || err == nil {
		t.Errorf("unparsable value: found %v, err %v", ok, err)
	}
}

// A chunked body must reach the CGI side with a Content-Length.
func TestSpoolChunkedBody(t *testing.T) {
	g := &gitHTTP{tmp: t.TempDir()}
	var gotLen int64
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.spool(r); err != nil {
			t.Error(err)
		}
		gotLen = r.ContentLength
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
	}))
	defer srv.Close()
	body := strings.Repeat("0032want deadbeef\n", 1000)
	// An io.Reader of unknown length makes the client send it chunked.
	req, err := http.NewRequest("POST", srv.URL, io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotLen != int64(len(body)) || gotBody != body {
		t.Fatalf("handler saw ContentLength %d and %d body bytes, want %d", gotLen, len(gotBody), len(body))
	}
}

// -ops keeps httpOps order and always runs http-push first: it creates
// the repository the other operations read.
func TestSelectOps(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"http-push", "http-push"},
		{"http-fetch,http-clone", "http-push,http-clone,http-fetch"},
		{"http-clone-x20, http-push", "http-push,http-clone-x20"},
	} {
		got, err := selectOps(tc.in)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("selectOps(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := selectOps("http-push,clone"); err == nil {
		t.Error("selectOps accepted an unknown operation")
	}
}

// The lfs lines: time ratio against the reference named by ref=, the
// per-round ratios' median and range, the file store's uploads against cp
// and sync with plain cp beside it.
func TestLFSLine(t *testing.T) {
	for _, tc := range []struct {
		r    lfsResult
		want string
	}{
		{lfsResult{op: "upload", store: "s3", objects: 5, mb: 20, rounds: 3, concurrency: 8, payloadMB: 300, rgit: 4 * time.Second, ref: 3 * time.Second,
			nodeIO: 101_000, control: 36900 * time.Microsecond, cmp: lfsPresigned,
			perRound: []pairedRound{{2 * time.Second, time.Second, 0}, {time.Second, time.Second, 0}, {time.Second, time.Second, 0}}},
			"lfs op=upload store=s3 objects=5 object_mb=20 rounds=3 concurrency=8 rgit_s=4.000 direct_s=3.000 ratio=1.33 round_ratio_median=1.00 round_ratio_range=1.00-2.00 rgit_mbps=75.0 direct_mbps=100.0 payload_mb=300 node_io_mb=0.101 control_ms=36.9 rgit=lfs-presigned ref=presigned-direct"},
		{lfsResult{op: "upload", store: "file", objects: 1, mb: 10, rounds: 1, concurrency: 1, payloadMB: 10, rgit: time.Second, ref: 500 * time.Millisecond, noSync: 100 * time.Millisecond,
			nodeIO: 20_000_000, control: 2 * time.Millisecond, cmp: lfsNodeUp},
			"lfs op=upload store=file objects=1 object_mb=10 rounds=1 concurrency=1 rgit_s=1.000 cp_sync_s=0.500 ratio=2.00 round_ratio_median=0.00 round_ratio_range=0.00-0.00 cp_s=0.100 rgit_mbps=10.0 cp_sync_mbps=20.0 payload_mb=10 node_io_mb=20.000 control_ms=2.0 rgit=lfs-node-served ref=cp-sync"},
		{lfsResult{op: "download", store: "file", objects: 5, mb: 20, rounds: 2, concurrency: 8, payloadMB: 200, rgit: 3 * time.Second, ref: time.Second, floor: 2 * time.Second,
			nodeIO: 400_000_000, control: 300 * time.Microsecond, cmp: lfsNodeDown,
			perRound: []pairedRound{{time.Second, 500 * time.Millisecond, time.Second}, {2 * time.Second, 500 * time.Millisecond, time.Second}}},
			"lfs op=download store=file objects=5 object_mb=20 rounds=2 concurrency=8 rgit_s=3.000 cp_s=1.000 ratio=3.00 round_ratio_median=2.00 round_ratio_range=2.00-4.00 floor_s=2.000 floor_ratio=1.50 floor_round_ratio_median=1.00 rgit_mbps=66.7 cp_mbps=200.0 payload_mb=200 node_io_mb=400.000 control_ms=0.3 rgit=lfs-node-served ref=cp"},
		{lfsResult{op: "download", store: "file", cmp: lfsNodeDown},
			"lfs op=download store=file objects=0 object_mb=0 rounds=0 concurrency=0 rgit_s=0.000 cp_s=0.000 ratio=0.00 round_ratio_median=0.00 round_ratio_range=0.00-0.00 rgit_mbps=0.0 cp_mbps=0.0 payload_mb=0 node_io_mb=0.000 control_ms=0.0 rgit=lfs-node-served ref=cp"},
	} {
		if got := tc.r.line(); got != tc.want {
			t.Errorf("line = %q\nwant   %q", got, tc.want)
		}
	}
}

// TestWebLine: a web line names the view, both sides' p50, p99 and CPU
// time per request, and their ratios; p50 and p99 are nearest-rank.
func TestWebLine(t *testing.T) {
	rg := []float64{4, 1, 3, 2}
	ref := []float64{8, 2, 6, 4}
	got := webLine("commit", "medium", "cgit", "cgit-cgi", rg, ref, [2]float64{1.5, 3})
	want := "web view=commit fixture=medium rgit_p50_ms=2.00 cgit_p50_ms=4.00 ratio_p50=0.50 rgit_p99_ms=4.00 cgit_p99_ms=8.00 ratio_p99=0.50 rgit_cpu_ms=1.50 cgit_cpu_ms=3.00 ratio_cpu=0.50 rgit=server ref=cgit-cgi"
	if got != want {
		t.Errorf("line = %q\nwant   %q", got, want)
	}
}
