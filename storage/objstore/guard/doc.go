// Package guard wraps an objstore.Store with what a node needs to live
// through a store outage:
//
//   - an operation deadline (RGIT_STORE_OP_TIMEOUT_MS) that counts only time
//     spent waiting on the store, so a hung store fails a request in
//     seconds rather than after the whole-request timeout;
//   - a health state (healthy, degraded, down) decided from the outcomes
//     of the node's own requests by the pure functions Observe and Admit;
//   - while the store is down, requests fail fast with
//     objstore.ErrUnavailable instead of piling onto it or waiting on it;
//     only probes (Probe, at most one a second) reach it, and the first
//     that succeeds makes it healthy again;
//   - every outcome classified (Classify) and reported to an Observer.
//
// Retries with backoff stay where they are (the S3 client's retryer);
// the guard adds none, so an outage is never amplified here.
//
// It imports the standard library, zap and storage/objstore.
package guard
