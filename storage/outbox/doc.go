// Package outbox is a repository's webhook outbox: its hooks, the
// deliveries waiting to be sent, and the log of finished ones, all kept in
// the repository's own database (storage/refdb) so that the events of a
// change are written in the same transaction as the change (a push's ref
// updates, a visibility flip, an access change): an acknowledged change
// always has its events, and a refused or failed one has none.
//
// Keys (beside the repository's refs and settings):
//
//	hook/{id}                   → Hook (JSON): URL, secret, events
//	hookn/{id}                  → Lane (JSON): pending, logged and dropped counts
//	hookq/{id}/{seq:016x}       → Delivery waiting (JSON), in order
//	hooklog/{id}/{seq:016x}     → Delivery finished: delivered or failed
//	meta/hookseq                → the next sequence number (decimal)
//
// One delivery is one event for one hook; its ID is the stable delivery
// id a receiver de-duplicates by (retries and redeliveries keep it). The
// repository's writer (its repo actor) is the only one that commits these
// keys, so the functions here read a refdb.View and return the operations
// to commit with the rest of the transaction; the counters are written
// with compare-and-set all the same, so a transaction built on a stale
// view fails rather than miscounts. Policy (policy.go) is the pure retry
// decision the delivery worker applies.
//
// It imports storage/refdb, storage/auth and the standard library.
package outbox
