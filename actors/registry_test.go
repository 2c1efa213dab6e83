package actors

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// TestRegistryStaysSmall: request futures register a fresh process id
// each; the node's registry must not keep a map bucket per id hashed so
// far (protoactor's default 32,768 maps grew by megabytes over the first
// thousands of requests).
func TestRegistryStaysSmall(t *testing.T) {
	n, err := NewNode(Config{Deps: repo.Deps{Store: memstore.New()}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(context.Background())
	if got := len(n.system.ProcessRegistry.LocalPIDs.LocalPIDs); got != registryBuckets {
		t.Fatalf("registry has %d maps, want %d", got, registryBuckets)
	}
	if _, ok := n.system.ProcessRegistry.GetLocal("eventstream"); !ok {
		t.Fatal("eventstream process lost when the registry was replaced")
	}
	echo, err := n.system.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond(s)
		}
	}), "echo")
	if err != nil {
		t.Fatal(err)
	}
	ask := func(k int) {
		for range k {
			if _, err := n.system.Root.RequestFuture(echo, "ping", 10*time.Second).Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ask(1000) // warm up: the registry's own buckets, the mailbox
	before := heapInUse()
	ask(20000)
	// 20,000 ids touch about 15,000 of protoactor's default maps, 4 MiB.
	if grew := heapInUse() - before; grew > 1<<20 {
		t.Fatalf("heap grew %d KiB over 20,000 requests", grew>>10)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
