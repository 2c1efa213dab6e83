package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/storage/walk"
)

// Bounds of a push event's commit list (the limits table, docs/operations.md).
const (
	// MaxCommits is how many commits a push event lists (the newest);
	// truncated says when it brought more.
	MaxCommits = 20
	// WalkBudget is how many commits the walk behind the list may visit;
	// a push past it lists what the walk found, with truncated set.
	WalkBudget = 100000
	// maxMessage bounds each commit message in a payload.
	maxMessage = 4096
)

// zeroID is what before and after say for a ref that did not exist, as
// git and other forges write it.
var zeroID = strings.Repeat("0", 40)

// Repository names the repository in a payload.
type Repository struct {
	Owner    string `json:"owner"`
	Name     string `json:"name"`
	FullName string `json:"full_name"`
}

func repository(r names.Repo) Repository {
	return Repository{Owner: r.Owner(), Name: r.Name(), FullName: r.String()}
}

// Payload is the JSON body of a delivery: the fields common to every
// event, then those of its kind (docs/webhooks.md documents each).
type Payload struct {
	Event      string     `json:"event"`
	Delivery   string     `json:"delivery"`
	Hook       string     `json:"hook"`
	Time       time.Time  `json:"time"`
	Repository Repository `json:"repository"`
	// Pusher is who pushed (ref events); Sender who made any other change.
	Pusher *outbox.Actor `json:"pusher,omitempty"`
	Sender *outbox.Actor `json:"sender,omitempty"`

	Ref       string   `json:"ref,omitempty"`
	RefType   string   `json:"ref_type,omitempty"`
	Before    string   `json:"before,omitempty"`
	After     string   `json:"after,omitempty"`
	Created   *bool    `json:"created,omitempty"`
	Deleted   *bool    `json:"deleted,omitempty"`
	Forced    *bool    `json:"forced,omitempty"`
	Commits   []Commit `json:"commits,omitzero"` // [] on every push event
	Truncated *bool    `json:"truncated,omitempty"`

	Visibility string               `json:"visibility,omitempty"`
	Access     *outbox.AccessChange `json:"access,omitempty"`
	Zen        string               `json:"zen,omitempty"` // ping
}

// Commit is one commit of a push event.
type Commit struct {
	ID        string `json:"id"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"` // the author's time, RFC 3339 in its zone
	Author    Person `json:"author"`
	Committer Person `json:"committer"`
}

// Person is a commit's author or committer.
type Person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// snapshotter takes a read view of the repository being delivered.
type snapshotter interface {
	Snapshot(ctx context.Context) (*repo.Snapshot, func(), error)
}

// body is d's payload for repository r. A push event's commits and forced
// flag are walked here (through walks, from a snapshot that src takes);
// the other events need nothing but the outbox record.
func body(ctx context.Context, src snapshotter, walks *walkCache, r names.Repo, d outbox.Delivery) ([]byte, error) {
	e := d.Event
	p := Payload{Event: e.Kind, Delivery: d.ID, Hook: d.Hook, Time: e.Time, Repository: repository(r)}
	actor := e.Actor
	switch e.Kind {
	case outbox.KindPush, outbox.KindCreate, outbox.KindDelete, outbox.KindTag:
		p.Pusher = &actor
		p.Ref, p.RefType = e.Ref, outbox.RefType(e.Ref)
		p.Before, p.After = orZero(e.Before), orZero(e.After)
		created, deleted := e.Before == "", e.After == ""
		p.Created, p.Deleted = &created, &deleted
		if e.Kind == outbox.KindPush {
			w, err := walks.get(ctx, src, e)
			if err != nil {
				return nil, err
			}
			p.Commits, p.Forced, p.Truncated = w.commits, &w.forced, &w.truncated
		}
	case outbox.KindVisibility:
		p.Sender, p.Visibility = &actor, e.Visibility
	case outbox.KindAccess:
		p.Sender, p.Access = &actor, e.Access
	default:
		return nil, fmt.Errorf("delivery %s: unknown event kind %q", d.ID, e.Kind)
	}
	return json.Marshal(p)
}

func orZero(hex string) string {
	if hex == "" {
		return zeroID
	}
	return hex
}

// pushWalk is what a push event's payload walks for: the newest
// MaxCommits commits the update brought (for an update, after --not
// before; for a new ref, after --not every other ref now), whether there
// were more (or the walk's budget ran out), and whether it was forced.
type pushWalk struct {
	commits           []Commit
	forced, truncated bool
}

// walkCache shares the walk of one ref update between the deliveries of
// its push event to each hook of the repository (one worker's).
type walkCache struct {
	mu sync.Mutex
	m  map[string]*walkEntry
}

type walkEntry struct {
	once sync.Once
	w    pushWalk
	err  error
}

// maxWalks bounds a walkCache: it is emptied when full (the entries are
// only useful while the deliveries of one event are sent).
const maxWalks = 64

func (c *walkCache) get(ctx context.Context, src snapshotter, e outbox.Event) (pushWalk, error) {
	key := e.Ref + " " + e.Before + " " + e.After
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxWalks {
		c.m = map[string]*walkEntry{}
	}
	ent, ok := c.m[key]
	if !ok {
		ent = &walkEntry{}
		c.m[key] = ent
	}
	c.mu.Unlock()
	ent.once.Do(func() { ent.w, ent.err = walkPush(ctx, src, e) })
	if ent.err != nil {
		c.mu.Lock()
		if c.m[key] == ent {
			delete(c.m, key) // not kept: the next attempt walks again
		}
		c.mu.Unlock()
	}
	return ent.w, ent.err
}

// walkPush walks for e (pushWalk).
func walkPush(ctx context.Context, src snapshotter, e outbox.Event) (pushWalk, error) {
	w := pushWalk{commits: []Commit{}}
	if e.After == "" {
		return w, nil
	}
	after, err := object.ParseID(e.After)
	if err != nil {
		return w, fmt.Errorf("event after %q: %w", e.After, err)
	}
	snap, release, err := src.Snapshot(ctx)
	if err != nil {
		return w, fmt.Errorf("snapshot for the commits of %s: %w", e.Ref, err)
	}
	defer release()
	var exclude []object.ID
	if e.Before != "" {
		before, err := object.ParseID(e.Before)
		if err != nil {
			return w, fmt.Errorf("event before %q: %w", e.Before, err)
		}
		exclude = []object.ID{before}
	} else {
		for _, r := range snap.Refs {
			if r.Name != e.Ref {
				exclude = append(exclude, r.ID)
			}
		}
	}
	objs := snap.Objects()
	nc, err := walk.ListNewCommits(ctx, walk.NewGraph(objs, WalkBudget), after, exclude, MaxCommits, WalkBudget)
	if errors.Is(err, object.ErrNotFound) {
		// Collected since (a later force-push and gc): the event still
		// says what moved.
		w.truncated = true
		return w, nil
	}
	if err != nil {
		return w, fmt.Errorf("commits of %s: %w", e.Ref, err)
	}
	// Forced when the walk shows before is not an ancestor; a walk cut
	// short by its budget shows nothing either way, and says truncated.
	w.forced, w.truncated = e.Before != "" && !nc.Descends && !nc.Exhausted, nc.Truncated
	for _, id := range nc.IDs {
		_, data, err := objs.ReadObject(id)
		if err != nil {
			return w, fmt.Errorf("commit %s: %w", id, err)
		}
		t := object.ParseCommitText(data)
		msg := t.Message
		if len(msg) > maxMessage {
			msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
		}
		c := Commit{ID: id.String(), Message: msg,
			Author:    Person{Name: t.Author.Name, Email: t.Author.Email},
			Committer: Person{Name: t.Committer.Name, Email: t.Committer.Email}}
		if !t.Author.When.IsZero() {
			c.Timestamp = t.Author.When.Format(time.RFC3339)
		}
		w.commits = append(w.commits, c)
	}
	return w, nil
}

// pingBody is the payload test-hook sends.
func pingBody(r names.Repo, h outbox.Hook, id string, now time.Time) ([]byte, error) {
	return json.Marshal(Payload{Event: outbox.KindPing, Delivery: id, Hook: h.ID, Time: now.UTC(),
		Repository: repository(r),
		Zen:        "rgit announces what changed, at least once"})
}
