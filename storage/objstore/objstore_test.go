package objstore_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
)

func TestValidateKey(t *testing.T) {
	for _, key := range []string{"a", "a/b/c", "repo/o/n/wal/00000001", "sp ace/ü+~", "..a/b..", ".hidden/x"} {
		if err := objstore.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/..", "a\x00", "\xc3", strings.Repeat("x", objstore.MaxKeyLen+1)} {
		if err := objstore.ValidateKey(key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%.20q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestClampRange(t *testing.T) {
	for _, c := range []struct{ off, length, size, start, end int64 }{
		{0, -1, 10, 0, 10},
		{2, 3, 10, 2, 5},
		{8, 5, 10, 8, 10},
		{10, 1, 10, 10, 10},
		{20, -1, 10, 10, 10},
		{3, 0, 10, 3, 3},
		{0, -1, 0, 0, 0},
	} {
		start, end, err := objstore.ClampRange(c.off, c.length, c.size)
		if err != nil || start != c.start || end != c.end {
			t.Errorf("ClampRange(%d, %d, %d) = %d, %d, %v; want %d, %d", c.off, c.length, c.size, start, end, err, c.start, c.end)
		}
	}
	if _, _, err := objstore.ClampRange(-1, 1, 10); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Errorf("ClampRange(-1) error = %v, want ErrInvalidRange", err)
	}
}

// spyStore records the context of the last call and serves a fixed body.
type spyStore struct {
	objstore.Store // nil: only the methods below are called
	ctx            context.Context
}

func (s *spyStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	s.ctx = ctx
	return io.NopCloser(strings.NewReader("0123456789")), nil
}

func (s *spyStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	s.ctx = ctx
	return io.NopCloser(strings.NewReader("0123456789")), objstore.ObjectInfo{Key: key, Size: 10}, nil
}

func (s *spyStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	s.ctx = ctx
	return objstore.ObjectInfo{}, nil
}

func (s *spyStore) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		s.ctx = ctx
		yield(objstore.ObjectInfo{Key: "a"}, nil)
	}
}

func TestWithTimeoutDeadlines(t *testing.T) {
	spy := &spyStore{}
	s := objstore.WithTimeout(spy, time.Hour)

	if _, err := s.Head(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if d, ok := spy.ctx.Deadline(); !ok || time.Until(d) > time.Hour {
		t.Errorf("Head context deadline = %v, %v; want within an hour", d, ok)
	}
	if spy.ctx.Err() == nil {
		t.Error("Head context still live after the call returned")
	}

	for range s.List(t.Context(), "", "") {
		if _, ok := spy.ctx.Deadline(); !ok || spy.ctx.Err() != nil {
			t.Error("List context has no deadline or is done during iteration")
		}
	}
	if spy.ctx.Err() == nil {
		t.Error("List context still live after iteration")
	}

	// Get: the deadline lives until Close, not until Get returns.
	rc, _, err := s.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := spy.ctx.Deadline(); !ok || spy.ctx.Err() != nil {
		t.Fatal("Get context has no deadline or is already done")
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if spy.ctx.Err() == nil {
		t.Error("Get context not canceled by Close")
	}
}

func TestWithTimeoutExpiresReader(t *testing.T) {
	spy := &spyStore{}
	s := objstore.WithTimeout(spy, 10*time.Millisecond)
	rc, err := s.GetRange(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	<-spy.ctx.Done() // the deadline, which nothing else cancels
	if _, err := rc.Read(make([]byte, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read after the deadline: error %v, want DeadlineExceeded", err)
	}
}

func TestWithTimeoutZeroIsIdentity(t *testing.T) {
	spy := &spyStore{}
	if s := objstore.WithTimeout(spy, 0); s != objstore.Store(spy) {
		t.Error("WithTimeout(s, 0) wrapped the store")
	}
}
