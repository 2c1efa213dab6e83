package repo

import (
	"context"
	"fmt"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/refdb"
)

// Webhooks: the hooks and the outbox live in the repository's database
// (storage/outbox has the keys). Every change that has events commits
// them in its own transaction (commitEvents): an acknowledged change
// always has its events, a refused or failed one none. Who made the
// change is the identity in ctx (auth.WithIdentity), which the repo
// actor puts there from its message.

// Outbox is the webhook outbox as of the last commit.
func (r *Repo) Outbox() outbox.View { return outbox.Read(r.db.View()) }

// AddHook adds a webhook (at most outbox.MaxHooks).
func (r *Repo) AddHook(ctx context.Context, h outbox.Hook) error {
	txn, err := outbox.AddHook(r.db.View(), h)
	if err != nil {
		return fmt.Errorf("add hook to %s/%s: %w", r.owner, r.name, err)
	}
	return r.commit(ctx, "add hook", txn)
}

// RemoveHook removes a webhook with its waiting deliveries and its log,
// and returns it.
func (r *Repo) RemoveHook(ctx context.Context, id string) (outbox.Hook, error) {
	h, txn, err := outbox.RemoveHook(r.db.View(), id)
	if err != nil {
		return h, fmt.Errorf("remove hook of %s/%s: %w", r.owner, r.name, err)
	}
	return h, r.commit(ctx, "remove hook", txn)
}

// Redeliver queues delivery id again (outbox.Redeliver).
func (r *Repo) Redeliver(ctx context.Context, id string) (outbox.Delivery, error) {
	d, txn, err := outbox.Redeliver(r.db.View(), id, r.d.now().UTC())
	if err != nil {
		return d, fmt.Errorf("redeliver in %s/%s: %w", r.owner, r.name, err)
	}
	return d, r.commit(ctx, "redeliver", txn)
}

// FinishDeliveries records the delivery worker's results.
func (r *Repo) FinishDeliveries(ctx context.Context, results []outbox.Result) error {
	txn, err := outbox.Finish(r.db.View(), results)
	if err != nil {
		return fmt.Errorf("record deliveries of %s/%s: %w", r.owner, r.name, err)
	}
	if len(txn) == 0 {
		return nil
	}
	return r.commit(ctx, "record deliveries", txn)
}

// event is an event of kind made now by the caller in ctx.
func (r *Repo) event(ctx context.Context, kind string) outbox.Event {
	return outbox.Event{Kind: kind, Time: r.d.now().UTC(), Actor: outbox.ActorOf(auth.IdentityFrom(ctx))}
}

// withEvents is txn followed by the operations that queue events for
// the hooks subscribed to them.
func (r *Repo) withEvents(txn refdb.Txn, events ...outbox.Event) (refdb.Txn, error) {
	ops, err := outbox.Enqueue(r.db.View(), events, r.d.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("webhook events of %s/%s: %w", r.owner, r.name, err)
	}
	return append(txn, ops...), nil
}

// commitEvents commits txn with its events.
func (r *Repo) commitEvents(ctx context.Context, what string, txn refdb.Txn, events ...outbox.Event) error {
	txn, err := r.withEvents(txn, events...)
	if err != nil {
		return err
	}
	return r.commit(ctx, what, txn)
}

// refEvents are the events of the push commands at active.
func (r *Repo) refEvents(ctx context.Context, cmds []RefUpdate, active []int) []outbox.Event {
	e := r.event(ctx, "")
	var out []outbox.Event
	for _, i := range active {
		c := cmds[i]
		out = append(out, outbox.RefEvents(c.Name, hexOrEmpty(c.Old), hexOrEmpty(c.New), e.Actor, e.Time)...)
	}
	return out
}

func hexOrEmpty(id object.ID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}
