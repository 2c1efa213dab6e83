// Package packcache is the node-local pack cache (RGIT_CACHE_DIR): pack and
// index files downloaded once from the object store, verified, kept on
// local disk across opens and restarts, and shared as reference-counted
// open *pack.Pack handles by concurrent readers. GetArriving hands out a
// pack while its file is still downloading (reads wait for their bytes,
// see pack.Arrival), so a cold node streams a clone as the pack arrives;
// the download is shared and runs to its end even if that caller leaves.
//
// One process owns a cache directory at a time (an flock on dir/LOCK).
// Layout: dir/LOCK, dir/packs/pack-<hex>.{pack,idx,bitmap}, dir/tmp/
// (partial downloads, wiped at open). The optional .bitmap is the pack's
// reachability bitmap (storage/bitmap), fetched on first use of Bitmap and
// held parsed beside the open pack. Every pack opened here shares one delta
// base cache (pack.BaseCache), so the node's inflated bases stay within one
// budget however many packs it holds open. Files are only ever published by rename, so a
// crash leaves either a complete pair or a stray file that Open removes;
// pairs found at open are fully re-verified on first use.
//
// It may import storage/objstore, storage/pack, storage/bitmap,
// storage/object, zap and the standard library.
package packcache
