// Package storage groups rgit's durable state and the git pack layer:
// the object store (storage/objstore and its backends), the per-repo ref
// database (storage/refdb), git objects (storage/object), pack reading,
// indexing and writing (storage/pack), object checks (storage/fsck),
// reachability (storage/walk), the local pack cache, and the table of
// format versions every stored and exchanged format is read against
// (storage/format). Storage imports nothing from actors/, transport/ or
// cluster/.
package storage
