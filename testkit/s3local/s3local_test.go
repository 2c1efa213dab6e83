package s3local_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestPauseKillRestart: a paused server takes connections but does not
// answer; a killed one refuses them; a restarted one serves the same data.
func TestPauseKillRestart(t *testing.T) {
	srv := s3local.Start(t)
	st, err := s3store.New(t.Context(), srv.Config("p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "k", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = st.Head(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Head of a paused server: %v, want the caller's deadline", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(t.Context(), "k"); err != nil {
		t.Fatalf("Head after Resume: %v", err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(t.Context(), "k"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Head of a killed server: %v, want connection refused", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Head(t.Context(), "k"); err != nil || info.Size != 1 {
		t.Fatalf("Head after Restart = %+v, %v", info, err)
	}
}
