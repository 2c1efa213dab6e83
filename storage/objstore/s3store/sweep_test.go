package s3store_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestSweepUploads: a sweep aborts exactly the unfinished uploads under
// its prefix started before its cutoff, with or without parts sent, and
// leaves the others; a second sweep finds nothing. It works the same
// through the node's wrappers (timeout, guard).
func TestSweepUploads(t *testing.T) {
	srv := s3local.Start(t)
	st := stageStore(t, srv, "sweep", srv.Endpoint)
	ctx := t.Context()
	// Uploads a killed writer left: one with a part sent, one without,
	// and one outside the swept prefix.
	start := func(key string, withPart bool) {
		t.Helper()
		k := "sweep/" + key
		up, err := st.Client().CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &k})
		if err != nil {
			t.Fatal(err)
		}
		if withPart {
			_, err := st.Client().UploadPart(ctx, &s3.UploadPartInput{Bucket: &srv.Bucket, Key: &k, UploadId: up.UploadId,
				PartNumber: aws.Int32(1), Body: bytes.NewReader(stageData(5 << 20)), ContentLength: aws.Int64(5 << 20)})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	start("objects/o/r/pack/pack-1.pack", true)
	start("objects/o/r/lfs/abc", false)
	start("objects/o/rx/pack/pack-2.pack", true)
	uploads := func() []string {
		t.Helper()
		out, err := st.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		slices.Sort(keys)
		return keys
	}
	all := uploads()
	if len(all) != 3 {
		t.Fatalf("uploads started: %v, want 3", all)
	}
	wrapped := guard.New(objstore.WithTimeout(st, time.Minute), guard.Options{OpTimeout: 10 * time.Second})
	for _, tc := range []struct {
		name string
		s    objstore.Store
	}{{"s3", st}, {"wrapped", wrapped}} {
		sw, ok := objstore.UploadSweeperOf(tc.s)
		if !ok {
			t.Fatalf("%s: no UploadSweeper", tc.name)
		}
		n, err := sw.SweepUploads(ctx, "objects/o/r/", time.Now().Add(-time.Hour))
		if err != nil || n != 0 {
			t.Fatalf("%s: sweep with a cutoff before the uploads: %d aborted, %v; want 0", tc.name, n, err)
		}
	}
	if got := uploads(); !slices.Equal(got, all) {
		t.Fatalf("uploads after a sweep that should take none: %v, want %v", got, all)
	}
	sw, _ := objstore.UploadSweeperOf(wrapped)
	// The server's clock may trail ours a little; a minute is ample.
	cutoff := time.Now().Add(time.Minute)
	n, err := sw.SweepUploads(ctx, "objects/o/r/", cutoff)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d aborted, %v; want 2", n, err)
	}
	if got, want := uploads(), []string{"sweep/objects/o/rx/pack/pack-2.pack"}; !slices.Equal(got, want) {
		t.Fatalf("uploads left: %v, want %v", got, want)
	}
	if n, err := sw.SweepUploads(ctx, "objects/o/r/", cutoff); err != nil || n != 0 {
		t.Fatalf("second sweep: %d aborted, %v; want 0", n, err)
	}
}

// TestSweepUploadsPages: a sweep goes through every page of the listing.
func TestSweepUploadsPages(t *testing.T) {
	srv := s3local.Start(t)
	st := stageStore(t, srv, "pages", srv.Endpoint)
	ctx := t.Context()
	const uploads = 1005 // S3 lists at most 1000 per page
	for i := range uploads {
		k := fmt.Sprintf("pages/p/%04d", i)
		if _, err := st.Client().CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &k}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := st.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket})
	if err != nil || !aws.ToBool(first.IsTruncated) {
		t.Fatalf("the server listed %d uploads in one page (%v): the test needs more than a page", len(first.Uploads), err)
	}
	n, err := st.SweepUploads(ctx, "p/", time.Now().Add(time.Minute))
	if err != nil || n != uploads {
		t.Fatalf("sweep: %d aborted, %v; want %d", n, err, uploads)
	}
}

// TestSweepUploadsRace: an upload aborted by another sweeper between the
// listing and the abort is skipped, not counted and not an error; an
// abort the store fails is the sweep's error.
func TestSweepUploadsRace(t *testing.T) {
	srv := s3local.Start(t)
	direct := stageStore(t, srv, "race", srv.Endpoint)
	ctx := t.Context()
	start := func(key string) {
		t.Helper()
		k := "race/" + key
		if _, err := direct.Client().CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &k}); err != nil {
			t.Fatal(err)
		}
	}
	isAbort := func(r *http.Request) bool { return r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") }
	var raced atomic.Bool
	st := stageStore(t, srv, "race", srv.FaultProxy(t, func(r *http.Request) bool {
		if isAbort(r) && raced.CompareAndSwap(false, true) {
			// Another sweeper aborts this upload first.
			key := strings.TrimPrefix(r.URL.Path, "/"+srv.Bucket+"/")
			id := r.URL.Query().Get("uploadId")
			if _, err := direct.Client().AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &srv.Bucket, Key: &key, UploadId: &id}); err != nil {
				t.Errorf("abort %s ahead of the sweep: %v", key, err)
			}
		}
		return false
	}))
	start("a")
	start("b")
	n, err := st.SweepUploads(ctx, "", time.Now().Add(time.Minute))
	if err != nil || n != 1 || !raced.Load() {
		t.Fatalf("sweep racing another: %d aborted, %v (raced %v); want 1, no error", n, err, raced.Load())
	}
	checkAbsent(t, direct, srv, "a")

	start("c")
	failing := stageStore(t, srv, "race", srv.FaultProxy(t, isAbort))
	if n, err := failing.SweepUploads(ctx, "", time.Now().Add(time.Minute)); err == nil || n != 0 {
		t.Fatalf("sweep whose aborts fail: %d aborted, %v; want 0 and an error", n, err)
	}
}
