package s3local_test

import (
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/s3local"
)

func TestStartServesBucket(t *testing.T) {
	srv := s3local.Start(t)
	st, err := s3store.New(t.Context(), srv.Config("p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "k", strings.NewReader("v"), 1); err != nil {
		t.Fatalf("Put: %v\nserver output:\n%s", err, srv.Output())
	}
	info, err := st.Head(t.Context(), "k")
	if err != nil || info.Size != 1 {
		t.Fatalf("Head = %+v, %v", info, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := st.Head(t.Context(), "k"); err == nil {
		t.Error("Head succeeded after Close")
	}
}
