package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
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
		return fmt.Errorf("add hook to %s: %w", r.name, err)
	}
	return r.commit(ctx, "add hook", txn)
}

// RemoveHook removes a webhook with its waiting deliveries and its log,
// and returns it.
func (r *Repo) RemoveHook(ctx context.Context, id string) (outbox.Hook, error) {
	h, txn, err := outbox.RemoveHook(r.db.View(), id)
	if err != nil {
		return h, fmt.Errorf("remove hook of %s: %w", r.name, err)
	}
	return h, r.commit(ctx, "remove hook", txn)
}

// Redeliver queues delivery id again (outbox.Redeliver).
func (r *Repo) Redeliver(ctx context.Context, id string) (outbox.Delivery, error) {
	d, txn, err := outbox.Redeliver(r.db.View(), id, r.d.now().UTC())
	if err != nil {
		return d, fmt.Errorf("redeliver in %s: %w", r.name, err)
	}
	return d, r.commit(ctx, "redeliver", txn)
}

// FinishDeliveries records the delivery worker's results.
func (r *Repo) FinishDeliveries(ctx context.Context, results []outbox.Result) error {
	txn, err := outbox.Finish(r.db.View(), results)
	if err != nil {
		return fmt.Errorf("record deliveries of %s: %w", r.name, err)
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
// the hooks subscribed to them; queued says whether there were any.
func (r *Repo) withEvents(txn refdb.Txn, events ...outbox.Event) (_ refdb.Txn, queued bool, err error) {
	ops, err := outbox.Enqueue(r.db.View(), events, r.d.now().UTC())
	if err != nil {
		return nil, false, fmt.Errorf("webhook events of %s: %w", r.name, err)
	}
	return append(txn, ops...), len(ops) > 0, nil
}

// commitEvents commits txn with its events.
func (r *Repo) commitEvents(ctx context.Context, what string, txn refdb.Txn, events ...outbox.Event) error {
	txn, queued, err := r.withEvents(txn, events...)
	if err != nil {
		return err
	}
	if _, err := r.commitMarked(ctx, txn, queued); err != nil {
		return fmt.Errorf("%s of %s: %w", what, r.name, err)
	}
	return nil
}

// Deliveries waiting are announced outside the database too, by a marker
// object per writer, hooks/pending/{owner}/{name}/{writer}: nodes sweep
// the markers (PendingRepos) and open the repositories whose deliveries
// no owner is sending (its owner crashed or drained, and nothing has
// opened the repository since). A writer writes its marker with its first
// commit that queues deliveries, at the same time as the commit, so an
// acknowledged change's deliveries are marked; it removes its own marker
// when it closes with nothing waiting, and SweepMarkers removes every
// writer's when nothing waits. Each writer touches only its own key until
// it holds the repository, so a writer that was fenced cannot remove a
// newer writer's marker.
const prefixPendingMarker = "hooks/pending/"

func pendingMarkers(r names.Repo) string { return prefixPendingMarker + r.String() + "/" }

func (r *Repo) markerKey() string { return pendingMarkers(r.name) + r.writerID }

// commitMarked commits txn; when it queues deliveries (queued) and this
// writer's marker is not written yet, the marker is written alongside,
// and the commit returns once both are done. A marker that fails is
// logged: the deliveries are in the outbox all the same, and only a
// crash before they are sent would then leave them until the repository
// is next opened.
func (r *Repo) commitMarked(ctx context.Context, txn refdb.Txn, queued bool) (uint64, error) {
	if !queued || r.marked {
		return r.db.Commit(ctx, txn)
	}
	done := make(chan error, 1)
	go func() { done <- r.d.Store.Put(ctx, r.markerKey(), bytes.NewReader(nil), 0) }()
	seq, err := r.db.Commit(ctx, txn)
	if perr := <-done; perr != nil {
		r.log.Warn("mark waiting webhook deliveries (they are queued; only a crash before they are sent leaves them until the repository is next opened)",
			zap.Error(perr))
	} else {
		r.marked = true
	}
	return seq, err
}

// SweepMarkers removes every writer's pending-delivery marker of the
// repository when no delivery waits, and reports whether any waits. It
// lists the markers, then makes sure this writer still holds the
// database (a durable write fails once a newer writer has fenced it),
// and removes only the markers it listed: a newer writer writes its
// marker after it fenced this one, so a marker listed before a
// successful check is never a newer writer's.
func (r *Repo) SweepMarkers(ctx context.Context) (waiting bool, err error) {
	n, _, err := r.Outbox().Pending()
	if err != nil || n > 0 {
		return n > 0, err
	}
	keys, err := listMarkers(ctx, r.d, r.name)
	if err != nil {
		return false, err
	}
	created, _ := r.db.Get(keyCreated)
	if err := r.commit(ctx, "check the writer", refdb.Txn{refdb.Check(keyCreated, created, false)}); err != nil {
		return false, err
	}
	if err := deleteMarkers(ctx, r.d, keys); err != nil {
		return false, fmt.Errorf("%s: %w", r.name, err)
	}
	r.marked = false
	return false, nil
}

// closeMarker removes this writer's marker when it closes with nothing
// waiting; a failure is left to the sweep.
func (r *Repo) closeMarker(ctx context.Context) {
	if !r.marked {
		return
	}
	if n, _, err := r.Outbox().Pending(); err != nil || n > 0 {
		return
	}
	if err := deleteMarkers(ctx, r.d, []string{r.markerKey()}); err != nil {
		r.log.Info("the sweep will remove the pending-delivery marker", zap.Error(err))
	}
}

// ClearMarkers removes every pending-delivery marker of r (a repository
// that no longer exists).
func ClearMarkers(ctx context.Context, d Deps, r names.Repo) error {
	keys, err := listMarkers(ctx, d, r)
	if err != nil {
		return err
	}
	if err := deleteMarkers(ctx, d, keys); err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	return nil
}

func listMarkers(ctx context.Context, d Deps, r names.Repo) ([]string, error) {
	var keys []string
	for info, err := range d.Store.List(ctx, pendingMarkers(r), "") {
		if err != nil {
			return nil, fmt.Errorf("list pending-delivery markers of %s: %w", r, err)
		}
		keys = append(keys, info.Key)
	}
	return keys, nil
}

func deleteMarkers(ctx context.Context, d Deps, keys []string) error {
	for _, k := range keys {
		if err := d.Store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("remove pending-delivery marker: %w", err)
		}
	}
	return nil
}

// PendingRepos lists the repositories ("owner/name") that have a
// pending-delivery marker, sorted.
func PendingRepos(ctx context.Context, d Deps) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for info, err := range d.Store.List(ctx, prefixPendingMarker, "") {
		if err != nil {
			return nil, fmt.Errorf("list pending-delivery markers: %w", err)
		}
		parts := strings.SplitN(strings.TrimPrefix(info.Key, prefixPendingMarker), "/", 3)
		if len(parts) < 3 {
			continue
		}
		if k := parts[0] + "/" + parts[1]; !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
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
