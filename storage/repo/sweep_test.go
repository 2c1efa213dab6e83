package repo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestGCAbortsStaleUploads: on S3, garbage collection aborts the
// unfinished uploads a killed node left under the repository's objects
// (a staged pack with its parts sent, a clone pack, an LFS object) once
// they are a day old, not when they pass minAge; it leaves another
// repository's alone, and an orphan collection (no database) aborts that
// one's. Deleting a repository aborts its uploads whatever their age.
func TestGCAbortsStaleUploads(t *testing.T) {
	srv := s3local.Start(t)
	cfg := srv.Config("gc")
	cfg.PartSize, cfg.MaxSinglePut = 5<<20, 1<<20
	st, err := s3store.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDeps(t, st)
	r := create(t, d, rn("o", "r"))
	other := rn("o", "rx") // never created: its leftovers are an orphan's

	// A push killed after sending its pack: staged, never committed.
	stager, ok := objstore.StagerOf(st)
	if !ok {
		t.Fatal("s3 store cannot stage")
	}
	pk, _ := PackKeys(r.name, "pack-"+strings.Repeat("ab", 20))
	body := bytes.Repeat([]byte("pack"), 6<<20/4)
	if _, err := stager.Stage(ctx, pk, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	start := func(key string) {
		t.Helper()
		k := "gc/" + key
		if _, err := st.Client().CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &k}); err != nil {
			t.Fatal(err)
		}
	}
	start(ClonePackPrefix(r.name) + "c.pack")
	start(LFSKey(r.name, strings.Repeat("0", 64)))
	start(ClonePackPrefix(other) + "c.pack")
	// unfinished counts the bucket's unfinished uploads.
	unfinished := func() int {
		t.Helper()
		out, err := st.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	if n := unfinished(); n != 4 {
		t.Fatalf("%d uploads started, want 4", n)
	}
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(2 * time.Hour)} {
		stats, err := gc(r, at, time.Hour)
		if err != nil || stats.AbortedUploads != 0 {
			t.Fatalf("GC %v later: %+v, %v; want no upload aborted", at.Sub(now), stats, err)
		}
	}
	// A minute beyond a day: the server's clock may trail ours a little.
	stats, err := gc(r, now.Add(staleUploadAge+time.Minute), time.Hour)
	if err != nil || stats.AbortedUploads != 3 {
		t.Fatalf("GC a day later: %+v, %v; want 3 uploads aborted", stats, err)
	}
	if n := unfinished(); n != 1 {
		t.Fatalf("%d uploads left, want 1 (the other repository's)", n)
	}

	p, err := PlanOrphanGC(ctx, d, other, now.Add(staleUploadAge+time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats, err := Collect(ctx, d, p); err != nil || stats.AbortedUploads != 1 {
		t.Fatalf("orphan GC a day later: %+v, %v; want 1 upload aborted", stats, err)
	}
	if n := unfinished(); n != 0 {
		t.Fatalf("%d uploads left after the orphan GC", n)
	}

	start(ClonePackPrefix(r.name) + "young.pack")
	r.Close(ctx)
	if err := Delete(ctx, d, r.name); err != nil {
		t.Fatal(err)
	}
	if n := unfinished(); n != 0 {
		t.Fatalf("%d uploads left after the repository's deletion", n)
	}
}
