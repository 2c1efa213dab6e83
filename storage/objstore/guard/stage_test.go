package guard_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// hungStager is a store whose Stage reads its body's first byte, then
// hangs until its request ends, as a store that stopped answering.
type hungStager struct{ *memstore.Store }

func (hungStager) Stage(ctx context.Context, _ string, r io.ReaderAt, _ int64) (objstore.Staged, error) {
	var b [1]byte
	r.ReadAt(b[:], 0)
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestStage: a guarded store stages only when the store it guards can,
// and a staging the store stops answering fails within the deadline as
// the store's failure.
func TestStage(t *testing.T) {
	if _, ok := objstore.StagerOf(guard.New(memstore.New(), guard.Options{})); ok {
		t.Fatal("a guarded memory store offers staging")
	}
	synctest.Test(t, func(t *testing.T) {
		g := guard.New(hungStager{memstore.New()}, guard.Options{OpTimeout: 2 * time.Second})
		st, ok := objstore.StagerOf(g)
		if !ok {
			t.Fatal("a guarded stager offers no staging")
		}
		start := time.Now()
		_, err := st.Stage(t.Context(), "k", bytes.NewReader([]byte("body")), 4)
		if took := time.Since(start); took != 2*time.Second || !errors.Is(err, objstore.ErrUnavailable) {
			t.Errorf("hung stage: %v after %v, want ErrUnavailable after the 2s deadline", err, took)
		}
	})
}
