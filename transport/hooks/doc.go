// Package hooks delivers webhooks: the delivery worker each open
// repository runs over its outbox (storage/outbox, driven by the repo
// actor through actors.HookQueue), the HTTP client that sends them safely,
// the payloads and their signature, and the hook commands' work behind
// rgit-admin (add-hook, test-hook).
//
// Delivery is at least once and in order per hook: a hook has one
// delivery in flight at a time, the next waits until the previous is
// delivered or given up. A failed attempt is retried with exponential
// backoff and jitter (outbox.Policy) until the retry window passes. Every
// attempt is recorded in the outbox through the repo actor before the next
// one starts, so a new owner resumes exactly where the last recorded
// attempt left off; a delivery whose attempt was in flight when its owner
// went is sent again, which is why receivers de-duplicate by the delivery
// id (X-Rgit-Delivery).
//
// Sweep is each node's loop over the pending-delivery markers writers
// leave in the store (storage/repo): it opens the marked repositories no
// live node holds, so deliveries resume after their owner crashed or
// drained even when nothing else touches the repository.
//
// What is cheap at commit time is in the outbox (ref, before, after,
// pusher); the commits a push event lists, and whether it was forced, are
// walked when the event is delivered, within a budget (MaxCommits,
// WalkBudget), from a snapshot of the repository: a push is acknowledged
// without waiting for any of it.
//
// Safety: the client dials only public addresses unless RGIT_HOOK_ALLOW
// lists the range (Guard, checked on the resolved address at connect
// time, so DNS cannot be rebound between a check and the connection),
// ignores proxy settings, follows no redirect, bounds connect and total
// time and reads at most a little of an answer; a node sends at most
// RGIT_HOOK_CONCURRENCY deliveries at once. A hook's secret signs each
// body (X-Hub-Signature-256) and is never logged or shown again.
//
// It imports actors/ and storage/, zap and Prometheus.
package hooks
