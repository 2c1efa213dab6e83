// Package pack reads, indexes and writes git pack files.
//
// It holds the .idx v2 reader and writer (Index, WriteIndex), random access to
// objects in a pack with delta resolution (Pack) through a delta base cache
// that a node's packs share within one budget, releasing idle bases
// (BaseCache), a
// read-only view over several packs (Set), the streaming indexer used on push
// (IndexPack: bounded memory whatever the pack size, thin-pack completion) and
// the pack producer used on fetch (Set.WritePack: stored bytes are copied
// verbatim wherever possible, deltas are never recomputed). The git delta
// format lives in delta.go (ApplyDelta); git's reverse index (.rev, the
// pack's offset order persisted beside it, OpenOptions.RevPath) in
// revindex.go.
//
// This is rgit's hot path, so it is its own code rather than go-git's (which
// is used only as a test oracle). It imports the standard library and
// storage/object only.
package pack
