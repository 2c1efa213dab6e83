package refdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

const testPrefix = "repo/o/n"

func newStores(seed int64) (*memstore.Store, *faultstore.Store) {
	mem := memstore.New()
	return mem, faultstore.New(mem, seed)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t *testing.T, ctx context.Context, fs *faultstore.Store, opts Options) *DB {
	t.Helper()
	db, err := Open(ctx, fs, testPrefix, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func mustCommit(t *testing.T, ctx context.Context, db *DB, txn ...Op) uint64 {
	t.Helper()
	seq, err := db.Commit(ctx, Txn(txn))
	if err != nil {
		t.Fatalf("Commit %v: %v", txn, err)
	}
	return seq
}

// contents returns a view as a plain map.
func contents(v *View) map[string]string {
	m := map[string]string{}
	for k, val := range v.Scan("") {
		m[k] = string(val)
	}
	return m
}

func diffMaps(got, want map[string]string) error {
	if maps.Equal(got, want) {
		return nil
	}
	keys := slices.Sorted(maps.Keys(got))
	keys = append(keys, slices.Sorted(maps.Keys(want))...)
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if g != w || gok != wok {
			return fmt.Errorf("key %q: got %q (present %v), want %q (present %v)", k, g, gok, w, wok)
		}
	}
	return errors.New("maps differ")
}
