// Package bitmap keeps reachability bitmaps for a pack, so a clone or an
// incremental fetch is answered by OR-ing and masking precomputed object
// sets instead of reading every tree of the history (C git's
// pack.useBitmaps / --use-bitmap-index, in rgit's own simpler format).
//
// An Index belongs to one pack. For a selection of commits (every ref tip
// at build time, and commits at intervals along the history) it stores the
// set of objects reachable from that commit; plus one mask per object type,
// for filters. A whole-repository Index (Build) covers its pack alone: bit
// i stands for the i-th object of the pack's .idx (sorted id order), so
// mapping a bit to an id and back needs no table of its own. A layer
// (BuildLayer) is the Index of a pack rolled up from a repository's newest
// packs, over the packs it left in place (its bases): its bits number the
// bases' objects first, then its own, so its masks may name objects below
// it, and the bases' own bitmaps keep their meaning. Queries run on a
// Stack: packs in that order with whichever bitmaps fit (Choose picks the
// stack covering most of a repository). Objects outside the stack (pushed
// since the last roll-up) get positions past it during a query, so the
// query walks from a want or have only down to the nearest masked commits.
// Reachable uses the same fill for the whole set a repository's refs
// reach (what a reader may be shown).
//
// File format (versions 2 and 3, all integers big-endian):
//
//	"RGBM" | version u32 | pack checksum [20] | object count u32 |
//	entry count u32 | [version 3: base count u32 |
//	bases: pack checksum [20] + object count u32] |
//	4 type masks (commit, tree, blob, tag) |
//	entries: id [20] + base u32 + mask | CRC-32C of everything before
//
// where a mask is a u32 byte length followed by the run-length encoded
// words described in encode (EWAH-like: a marker word per fill run and
// literal run), and base is 0xffffffff or the index of an earlier entry
// whose mask this one is XOR-ed with (chains at most maxChain long).
// Version 2 is written for a whole-repository index and version 3 for a
// layer, so a node that predates layers reads the former and refuses
// (walks past) the latter. Version 1 files, identical to version 2 but
// sealed with a SHA-1 of everything before, are still read. The whole
// file is checked on every open (see unseal): one whose checksum, pack
// checksum or object count does not match is rejected (ErrCorrupt,
// ErrMismatch) and the caller walks; so is a layer whose bases are not the
// packs below it in the stack (NewStack leaves it out).
//
// The package imports storage/object, storage/pack and storage/walk.
package bitmap
