package guard_test

import (
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// TestSweepUploadsAbsent: the node's wrappers over a store that leaves no
// unfinished uploads offer no sweeping (the S3 side: s3store's
// TestSweepUploads).
func TestSweepUploadsAbsent(t *testing.T) {
	fs, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, inner := range []objstore.Store{memstore.New(), fs} {
		g := guard.New(objstore.WithTimeout(inner, time.Minute), guard.Options{})
		if _, ok := objstore.UploadSweeperOf(g); ok {
			t.Errorf("a guarded %s offers sweeping", objstore.Describe(inner))
		}
	}
}
