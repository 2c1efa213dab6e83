package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/transport/product/hooks"
)

// Webhook commands: hooks live in the repository's database and change
// through its repo actor on the owning node, like access settings; each
// needs the admin role (--as) and has a typed reply.
type (
	// AddHook adds a hook; an empty Secret has one generated (shown once).
	AddHook struct {
		Repo   string `json:"repo"`
		URL    string `json:"url"`
		Secret string `json:"secret,omitempty"`
		Events string `json:"events,omitempty"` // comma-separated; empty: push
		As     string `json:"as,omitempty"`
	}
	ListHooks struct {
		Repo string `json:"repo"`
		As   string `json:"as,omitempty"`
	}
	RemoveHook struct {
		Repo string `json:"repo"`
		ID   string `json:"id"`
		As   string `json:"as,omitempty"`
	}
	// TestHook sends a ping to the hook now and reports its answer.
	TestHook struct {
		Repo string `json:"repo"`
		ID   string `json:"id"`
		As   string `json:"as,omitempty"`
	}
	// ListDeliveries lists waiting and finished deliveries, newest first;
	// Hook narrows them to one hook, Failed to the given-up ones.
	ListDeliveries struct {
		Repo   string `json:"repo"`
		Hook   string `json:"hook,omitempty"`
		Failed bool   `json:"failed,omitempty"`
		As     string `json:"as,omitempty"`
	}
	Redeliver struct {
		Repo string `json:"repo"`
		ID   string `json:"id"`
		As   string `json:"as,omitempty"`
	}
)

func (AddHook) op() (string, Result)        { return "add-hook", new(HookAdded) }
func (ListHooks) op() (string, Result)      { return "list-hooks", new(HookList) }
func (RemoveHook) op() (string, Result)     { return "remove-hook", new(Message) }
func (TestHook) op() (string, Result)       { return "test-hook", new(HookTested) }
func (ListDeliveries) op() (string, Result) { return "deliveries", new(DeliveryList) }
func (Redeliver) op() (string, Result)      { return "redeliver", new(Message) }

func (m AddHook) target() string        { return m.Repo }
func (m ListHooks) target() string      { return m.Repo }
func (m RemoveHook) target() string     { return m.Repo }
func (m TestHook) target() string       { return m.Repo }
func (m ListDeliveries) target() string { return m.Repo }
func (m Redeliver) target() string      { return m.Repo }

// MarshalLogObject logs add-hook without its secret.
func (m AddHook) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("repo", m.Repo)
	enc.AddString("url", m.URL)
	enc.AddString("events", m.Events)
	enc.AddBool("secret_given", m.Secret != "")
	enc.AddString("as", m.As)
	return nil
}

// HookInfo is a hook as listings show it: never its secret.
type HookInfo struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by,omitempty"`
	Created   time.Time `json:"created"`
	// Pending deliveries wait; Dropped events were not queued because
	// outbox.MaxPending were waiting.
	Pending int `json:"pending"`
	Dropped int `json:"dropped,omitempty"`
}

func (h HookInfo) line() string {
	s := fmt.Sprintf("%s %s events=%s pending=%d", h.ID, h.URL, strings.Join(h.Events, ","), h.Pending)
	if h.Dropped > 0 {
		s += fmt.Sprintf(" dropped=%d", h.Dropped)
	}
	return s + fmt.Sprintf(" (added by %s at %s)", h.CreatedBy, stamp(h.Created))
}

// HookAdded is add-hook's answer. Secret is set only when rgit made it:
// it is shown this once.
type HookAdded struct {
	Repo   string   `json:"repo"`
	Hook   HookInfo `json:"hook"`
	Secret string   `json:"secret,omitempty"`
}

func (a HookAdded) Text() string {
	s := "added hook " + a.Hook.ID + " to " + a.Repo + ": " + a.Hook.URL + " (" + strings.Join(a.Hook.Events, ",") + ")"
	if a.Secret != "" {
		s += "\nsecret (shown only now; receivers verify X-Hub-Signature-256 with it):\n" + a.Secret
	}
	return s
}

// HookList is list-hooks' answer.
type HookList struct {
	Repo  string     `json:"repo"`
	Hooks []HookInfo `json:"hooks"`
}

func (l HookList) Text() string {
	if len(l.Hooks) == 0 {
		return l.Repo + " has no hooks"
	}
	lines := make([]string, len(l.Hooks))
	for i, h := range l.Hooks {
		lines[i] = h.line()
	}
	return strings.Join(lines, "\n")
}

// HookTested is test-hook's answer: the ping's attempt.
type HookTested struct {
	Hook     string `json:"hook"`
	Delivery string `json:"delivery"`
	OK       bool   `json:"ok"`
	Status   int    `json:"status,omitempty"`
	Millis   int64  `json:"ms"`
	Error    string `json:"error,omitempty"`
}

func (t HookTested) Text() string {
	if t.OK {
		return fmt.Sprintf("hook %s answered the ping with HTTP %d in %d ms", t.Hook, t.Status, t.Millis)
	}
	return fmt.Sprintf("hook %s: the ping failed after %d ms: %s", t.Hook, t.Millis, t.Error)
}

// DeliveryInfo is one delivery as deliveries lists it.
type DeliveryInfo struct {
	ID          string    `json:"id"`
	Hook        string    `json:"hook"`
	Event       string    `json:"event"`
	Ref         string    `json:"ref,omitempty"`
	State       string    `json:"state"` // pending, delivered or failed
	Queued      time.Time `json:"queued"`
	Attempts    int       `json:"attempts"`
	Next        time.Time `json:"next,omitzero"`
	Status      int       `json:"status,omitempty"` // of the last attempt
	Millis      int64     `json:"ms,omitempty"`
	Error       string    `json:"error,omitempty"`
	Redelivered bool      `json:"redelivered,omitempty"`
}

// DeliveryList is deliveries' answer, newest first.
type DeliveryList struct {
	Repo       string         `json:"repo"`
	Deliveries []DeliveryInfo `json:"deliveries"`
}

func (l DeliveryList) Text() string {
	if len(l.Deliveries) == 0 {
		return "no deliveries"
	}
	var b strings.Builder
	b.WriteString("ID                                    HOOK              EVENT       STATE      ATTEMPTS  LAST")
	for _, d := range l.Deliveries {
		last := "-"
		if d.Attempts > 0 {
			last = fmt.Sprintf("%d %dms %s", d.Status, d.Millis, d.Error)
		}
		fmt.Fprintf(&b, "\n%-37s %-17s %-11s %-10s %-9d %s", d.ID, d.Hook, d.Event, d.State, d.Attempts, strings.TrimSpace(last))
	}
	return b.String()
}

// errNoHookService: test-hook on a node that does not deliver webhooks.
var errNoHookService = errors.New("this node does not deliver webhooks")

func hookInfo(v outbox.View, h outbox.Hook) (HookInfo, error) {
	l, err := v.Lane(h.ID)
	return HookInfo{ID: h.ID, URL: h.URL, Events: h.Events, CreatedBy: h.CreatedBy, Created: h.Created,
		Pending: l.Pending, Dropped: l.Dropped}, err
}

func (s *Server) addHook(ctx context.Context, m AddHook) (HookAdded, error) {
	who, rp, err := s.accessTo(ctx, "add-hook", m.Repo, m.As)
	if err != nil {
		return HookAdded{}, err
	}
	h, generated, err := hooks.NewHook(m.URL, m.Secret, m.Events, who, time.Now())
	if err != nil {
		return HookAdded{}, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err := s.Node.AddHook(ctx, rp, h); err != nil {
		return HookAdded{}, err
	}
	r := rp.String()
	s.audit(who, "add-hook", zap.String("repo", r), zap.String("hook", h.ID), zap.String("url", h.URL), zap.Strings("events", h.Events))
	a := HookAdded{Repo: r, Hook: HookInfo{ID: h.ID, URL: h.URL, Events: h.Events, CreatedBy: h.CreatedBy, Created: h.Created}}
	if generated {
		a.Secret = h.Secret
	}
	return a, nil
}

func (s *Server) listHooks(ctx context.Context, m ListHooks) (HookList, error) {
	_, rp, err := s.accessTo(ctx, "list-hooks", m.Repo, m.As)
	if err != nil {
		return HookList{}, err
	}
	v, err := s.Node.Outbox(ctx, rp)
	if err != nil {
		return HookList{}, err
	}
	hs, err := v.Hooks()
	if err != nil {
		return HookList{}, err
	}
	l := HookList{Repo: rp.String(), Hooks: []HookInfo{}}
	for _, h := range hs {
		info, err := hookInfo(v, h)
		if err != nil {
			return HookList{}, err
		}
		l.Hooks = append(l.Hooks, info)
	}
	return l, nil
}

func (s *Server) removeHook(ctx context.Context, m RemoveHook) (Message, error) {
	who, rp, err := s.accessTo(ctx, "remove-hook", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	if err := checkHookID(m.ID); err != nil {
		return Message{}, err
	}
	h, err := s.Node.RemoveHook(ctx, rp, m.ID)
	if err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "remove-hook", zap.String("repo", r), zap.String("hook", h.ID), zap.String("url", h.URL))
	return Message{Summary: fmt.Sprintf("removed hook %s (%s) of %s, with its waiting deliveries and its log", h.ID, h.URL, r)}, nil
}

func (s *Server) testHook(ctx context.Context, m TestHook) (HookTested, error) {
	_, rp, err := s.accessTo(ctx, "test-hook", m.Repo, m.As)
	if err != nil {
		return HookTested{}, err
	}
	if err := checkHookID(m.ID); err != nil {
		return HookTested{}, err
	}
	if s.Hooks == nil {
		return HookTested{}, errNoHookService
	}
	v, err := s.Node.Outbox(ctx, rp)
	if err != nil {
		return HookTested{}, err
	}
	h, ok, err := v.Hook(m.ID)
	if err != nil {
		return HookTested{}, err
	}
	if !ok {
		return HookTested{}, fmt.Errorf("%s: hook %s: %w", rp, m.ID, outbox.ErrNoHook)
	}
	a, id, err := s.Hooks.Ping(ctx, rp, h)
	if err != nil {
		return HookTested{}, err
	}
	return HookTested{Hook: h.ID, Delivery: id, OK: a.OK(), Status: a.Status, Millis: a.Millis, Error: a.Error}, nil
}

func (s *Server) listDeliveries(ctx context.Context, m ListDeliveries) (DeliveryList, error) {
	_, rp, err := s.accessTo(ctx, "deliveries", m.Repo, m.As)
	if err != nil {
		return DeliveryList{}, err
	}
	if m.Hook != "" {
		if err := checkHookID(m.Hook); err != nil {
			return DeliveryList{}, err
		}
	}
	v, err := s.Node.Outbox(ctx, rp)
	if err != nil {
		return DeliveryList{}, err
	}
	hs, err := v.Hooks()
	if err != nil {
		return DeliveryList{}, err
	}
	var ds []outbox.Delivery
	found := m.Hook == ""
	for _, h := range hs {
		if m.Hook != "" && h.ID != m.Hook {
			continue
		}
		found = true
		waiting, err := v.Head(h.ID, outbox.MaxLog)
		if err != nil {
			return DeliveryList{}, err
		}
		logged, err := v.Log(h.ID)
		if err != nil {
			return DeliveryList{}, err
		}
		for _, d := range append(logged, waiting...) {
			if !m.Failed || d.State == outbox.StateFailed {
				ds = append(ds, d)
			}
		}
	}
	if !found {
		return DeliveryList{}, fmt.Errorf("%s: hook %s: %w", rp, m.Hook, outbox.ErrNoHook)
	}
	// Newest first: by when queued, the sequence breaking ties.
	slices.SortFunc(ds, func(a, b outbox.Delivery) int {
		if c := b.Queued.Compare(a.Queued); c != 0 {
			return c
		}
		return cmp.Compare(b.Seq, a.Seq)
	})
	l := DeliveryList{Repo: rp.String(), Deliveries: make([]DeliveryInfo, len(ds))}
	for i, d := range ds {
		l.Deliveries[i] = deliveryInfo(d)
	}
	return l, nil
}

func deliveryInfo(d outbox.Delivery) DeliveryInfo {
	i := DeliveryInfo{ID: d.ID, Hook: d.Hook, Event: d.Event.Kind, Ref: d.Event.Ref, State: d.State, Queued: d.Queued,
		Attempts: d.Attempts, Next: d.Next, Redelivered: d.Redelivered}
	if n := len(d.Last); n > 0 {
		a := d.Last[n-1]
		i.Status, i.Millis, i.Error = a.Status, a.Millis, a.Error
	}
	return i
}

func (s *Server) redeliver(ctx context.Context, m Redeliver) (Message, error) {
	who, rp, err := s.accessTo(ctx, "redeliver", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	d, err := s.Node.Redeliver(ctx, rp, m.ID)
	if err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "redeliver", zap.String("repo", r), zap.String("hook", d.Hook), zap.String("delivery", d.ID))
	return Message{Summary: fmt.Sprintf("delivery %s (%s) of %s queued again for hook %s", d.ID, d.Event.Kind, r, d.Hook)}, nil
}

// checkHookID refuses an id that is not a hook id's form, as a usage
// error (it could not name any hook).
func checkHookID(id string) error {
	if !outbox.ValidHookID(id) {
		return fmt.Errorf("%w: %q is not a hook id (16 hex digits, from list-hooks)", ErrUsage, id)
	}
	return nil
}
