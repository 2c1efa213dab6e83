package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryBuckets is how many concurrent maps hold the node's local
// processes (actors and request futures), each of 32 shards.
//
// protoactor-go makes 1,024 of them: 32,768 Go maps, 2.5 MiB at start,
// and each map allocates its first bucket (about 300 bytes) the first
// time a process id hashes to it and keeps it after the process is gone.
// Every request through a future registers a fresh id, so a node's
// registry grew towards 9 MiB over its first tens of thousands of
// requests (a heap profile of `rgit-bench maint`: 2.5 MiB more after
// 1,000 pushes than after 100) for lock striping a node with a few cores
// does not need. 16 maps (512 shards) are a few hundred KiB at most.
const registryBuckets = 16

// shrinkRegistry replaces the actor system's process registry with one of
// registryBuckets maps, moving what is registered already. It must run
// before anything else uses the system (no lock guards the swap).
func shrinkRegistry(sys *actor.ActorSystem) {
	old := sys.ProcessRegistry.LocalPIDs
	m := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range m.LocalPIDs {
		m.LocalPIDs[i] = cmap.New()
	}
	for _, b := range old.LocalPIDs {
		for id, p := range b.Items() {
			m.GetBucket(id).Set(id, p)
		}
	}
	sys.ProcessRegistry.LocalPIDs = m
}
