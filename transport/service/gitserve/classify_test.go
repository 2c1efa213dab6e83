package gitserve

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/packcache"
)

// TestNodeConditionsAreUnavailable: a store outage and a full cache disk
// are the node's conditions, passing with time: 503 (Retry-After), with
// the cause named, never a 500.
func TestNodeConditionsAreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		msg  string
		want Class
	}{
		{fmt.Errorf("open session a/b: %w", objstore.ErrUnavailable), StoreUnavailable, Unavailable},
		{fmt.Errorf("open session a/b: snapshot: %w: pack-1: no space", packcache.ErrDiskFull), CacheDiskFull, Unavailable},
		{errors.New("open session a/b: boom"), Internal.Message(), Internal},
	} {
		if c, m := Classify(tc.err), ClientMessage(tc.err); c != tc.want || m != tc.msg {
			t.Errorf("%v: class %v, message %q; want %v, %q", tc.err, c, m, tc.want, tc.msg)
		}
	}
}
