package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// A Store keeps objects under '/'-separated keys: Put replaces, PutIfAbsent
// creates only once, List walks a prefix in key order. Every backend
// (filestore, s3store) behaves the same way.
func Example() {
	ctx := context.Background()
	var s objstore.Store = memstore.New()

	put := func(key, body string) {
		if err := s.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			panic(err)
		}
	}
	put("repo/alice/web/packs/pack-1.pack", "PACK…")
	put("repo/alice/web/packs/pack-1.idx", "idx")
	put("repo/bob/tools/packs/pack-2.pack", "PACK")

	r, info, err := s.Get(ctx, "repo/alice/web/packs/pack-1.idx")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(r)
	r.Close()
	fmt.Printf("%s: %q (%d bytes)\n", info.Key, body, info.Size)

	err = s.PutIfAbsent(ctx, "repo/alice/web/packs/pack-1.idx", strings.NewReader("x"), 1)
	fmt.Println("second create:", errors.Is(err, objstore.ErrExists))

	for o, err := range s.List(ctx, "repo/alice/", "") {
		if err != nil {
			panic(err)
		}
		fmt.Println(o.Key, o.Size)
	}
	// Output:
	// repo/alice/web/packs/pack-1.idx: "idx" (3 bytes)
	// second create: true
	// repo/alice/web/packs/pack-1.idx 3
	// repo/alice/web/packs/pack-1.pack 7
}
