// Package bitmap keeps reachability bitmaps for a pack, so a clone or an
// incremental fetch is answered by OR-ing and masking precomputed object
// sets instead of reading every tree of the history (C git's
// pack.useBitmaps / --use-bitmap-index, in rgit's own simpler format).
//
// An Index belongs to one pack: bit i stands for the i-th object of the
// pack's .idx (sorted id order), so mapping a bit to an id and back needs no
// table of its own. For a selection of commits (every ref tip at build
// time, and commits at intervals along the history) it stores the set of
// objects reachable from that commit, which must lie wholly inside the
// pack; plus one mask per object type, for filters. Objects outside the pack
// (pushed after the bitmap was built) get positions past the pack's count
// during a query, so a repository repacked once and pushed to since still
// uses its bitmap: the query walks from a want or have only down to the
// nearest bitmapped commits.
//
// File format (version 2, all integers big-endian):
//
//	"RGBM" | version u32 | pack checksum [20] | object count u32 |
//	entry count u32 | 4 type masks (commit, tree, blob, tag) |
//	entries: id [20] + base u32 + mask | CRC-32C of everything before
//
// where a mask is a u32 byte length followed by the run-length encoded
// words described in encode (EWAH-like: a marker word per fill run and
// literal run), and base is 0xffffffff or the index of an earlier entry
// whose mask this one is XOR-ed with (chains at most maxChain long).
// Version 1 files, identical but sealed with a SHA-1 of everything before,
// are still read. The whole file is checked on every open (see unseal): one
// whose checksum, pack checksum or object count does not match is rejected
// (ErrCorrupt, ErrMismatch) and the caller walks.
//
// The package imports storage/object, storage/pack and storage/walk.
package bitmap
