package s3store_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/s3local"
)

// stageStore is a store under prefix with 5 MiB parts and bodies over
// 1 MiB sent in parts, reached through endpoint (versitygw or a proxy).
func stageStore(t *testing.T, srv *s3local.Server, prefix, endpoint string) *s3store.Store {
	t.Helper()
	cfg := srv.Config(prefix)
	cfg.Endpoint = endpoint
	cfg.PartSize, cfg.MaxSinglePut = 5<<20, 1<<20
	st, err := s3store.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func stageData(n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	return data
}

// checkAbsent fails unless key is absent and no multipart upload of the
// bucket is left unfinished.
func checkAbsent(t *testing.T, st *s3store.Store, srv *s3local.Server, key string) {
	t.Helper()
	if _, err := st.Head(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head(%s) = %v, want not found", key, err)
	}
	out, err := st.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Errorf("%d multipart uploads left unfinished", len(out.Uploads))
	}
}

func checkStored(t *testing.T, st *s3store.Store, key string, want []byte) {
	t.Helper()
	rc, _, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("stored object differs: %d bytes (want %d), err %v", len(got), len(want), err)
	}
}

// TestStage: staged bytes are invisible until Commit, then stored whole;
// an aborted stage leaves nothing; both in parts and as one PutObject.
func TestStage(t *testing.T) {
	srv := s3local.Start(t)
	st := stageStore(t, srv, "stage", srv.Endpoint)
	for _, n := range []int{12<<20 + 123, 1 << 19} {
		data := stageData(n)
		staged, err := st.Stage(t.Context(), "k", bytes.NewReader(data), int64(n))
		if err != nil {
			t.Fatalf("Stage %d bytes: %v", n, err)
		}
		if _, err := st.Head(t.Context(), "k"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("staged object visible before Commit: Head = %v", err)
		}
		if err := staged.Commit(t.Context()); err != nil {
			t.Fatalf("Commit %d bytes: %v", n, err)
		}
		staged.Abort(t.Context()) // after Commit: nothing
		checkStored(t, st, "k", data)
		if err := st.Delete(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}

		staged, err = st.Stage(t.Context(), "k", bytes.NewReader(data), int64(n))
		if err != nil {
			t.Fatal(err)
		}
		staged.Abort(t.Context())
		checkAbsent(t, st, srv, "k")
	}
}

// TestStageFaults: a part or the completion refused by the store fails
// the stage or the commit, and leaves neither the object nor parts.
func TestStageFaults(t *testing.T) {
	srv := s3local.Start(t)
	var failPart, failComplete atomic.Bool
	proxy := srv.FaultProxy(t, func(r *http.Request) bool {
		q := r.URL.Query()
		return failPart.Load() && r.Method == http.MethodPut && q.Get("partNumber") == "2" ||
			failComplete.Load() && r.Method == http.MethodPost && q.Has("uploadId")
	})
	st := stageStore(t, srv, "faults", proxy)
	data := stageData(12 << 20)

	failPart.Store(true)
	if _, err := st.Stage(t.Context(), "k", bytes.NewReader(data), int64(len(data))); err == nil {
		t.Fatal("Stage succeeded with part 2 refused")
	}
	checkAbsent(t, st, srv, "k")
	failPart.Store(false)

	staged, err := st.Stage(t.Context(), "k", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	failComplete.Store(true)
	if err := staged.Commit(t.Context()); err == nil {
		t.Fatal("Commit succeeded with the completion refused")
	}
	staged.Abort(t.Context())
	checkAbsent(t, st, srv, "k")
}
