package gitproto

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

// An upload-pack session borrows its 128 KiB of buffers from a pool: a
// node answering thousands of ls-remotes a second allocated them anew
// for every request, most of what a request allocated and of the
// collector's work.
func TestUploadPackReusesBuffers(t *testing.T) {
	opt := Options{Protocol: 2, StatelessRPC: true, AdvertiseOnly: true, Agent: "rgit-test/1"}
	run := func() {
		if err := UploadPack(context.Background(), nil, strings.NewReader(""), io.Discard, opt); err != nil {
			t.Fatal(err)
		}
	}
	run() // fills the pools
	const n = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		run()
	}
	runtime.ReadMemStats(&after)
	// Under the race detector the pool drops a quarter of what it is
	// given; without reuse a session allocates twice this.
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > connBufSize {
		t.Fatalf("an advertisement allocated %d bytes, want under %d (buffers reused)", per, connBufSize)
	}
}
