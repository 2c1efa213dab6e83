package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
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

// The lead's report parses these lines: keep the format exact.
func TestResultLine(t *testing.T) {
	r := result{
		op: "clone", fixture: "large",
		rgit:      []sample{{secs: 1.5, rssKB: 2048}, {secs: 1.25, rssKB: 4096}, {secs: 2}},
		git:       []sample{{secs: 0.5}, {secs: 0.5}, {secs: 0.75}},
		rgitRSSMB: peakMB([]sample{{rssKB: 2048}, {rssKB: 4096}}),
	}
	want := "bench op=clone fixture=large rgit_s=1.500 git_s=0.500 ratio=3.00 rgit_rss_mb=4"
	if got := r.line(); got != want {
		t.Fatalf("line = %q\nwant   %q", got, want)
	}
	re := regexp.MustCompile(`^bench op=\S+ fixture=\S+ rgit_s=\d+\.\d{3} git_s=\d+\.\d{3} ratio=\d+\.\d{2} rgit_rss_mb=\d+$`)
	if zero := (result{op: "fetch", fixture: "small"}).line(); !re.MatchString(zero) {
		t.Errorf("line without samples %q does not match the format", zero)
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
