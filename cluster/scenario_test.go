package cluster

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/datadriven"
)

// Scenario tests: testdata/*.txt hold cases in the datadriven style (see
// testkit/datadriven)
//
//	command key=value ...
//	----
//	expected output (no blank lines)
//
// separated by blank lines; '#' lines are comments. Times are offsets from
// a fixed origin (at=1.5s). Run with -rewrite to regenerate expectations.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, f string) {
		datadriven.RunFile(t, f, newWorld().commands().Run)
	})
}

// world is the cluster as the scenarios see it: the leader's map, every
// node's holders and suspicions, the live set and the leader's reachability.
type world struct {
	m        *Map
	live     LiveSet
	leaderUp bool
	holders  map[[2]string]Holder // (node, repo)
	epochs   map[[2]string]uint64 // the epoch each holder was granted
	susp     map[string]Suspicions
}

func newWorld() *world {
	return &world{m: NewMap(DefaultTimings()), leaderUp: true, holders: map[[2]string]Holder{}, epochs: map[[2]string]uint64{}, susp: map[string]Suspicions{}}
}

func rel(t time.Time) string { return t.Sub(t0).String() }

// call is one command line as its handler sees it: the key=value
// arguments (repo= and node= picked out), the time it happens (at=DUR
// after t0) and the lines it prints.
type call struct {
	w          *world
	args       map[string]string
	repo, node string
	r          names.Repo // repo=, parsed
	now        time.Time
	out        []string
}

func (c *call) say(format string, a ...any) { c.out = append(c.out, fmt.Sprintf(format, a...)) }

// step feeds ev to node's holder of repo, if it has one, and prints the
// transition and its actions.
func (c *call) step(node, repo string, ev Event) {
	k := [2]string{node, repo}
	h, ok := c.w.holders[k]
	if !ok {
		return
	}
	nh, acts := Step(h, ev, c.now)
	c.w.holders[k] = nh
	if nh.State != h.State || len(acts) > 0 {
		c.say("%s %s: %s -> %s %s", node, repo, h.State, nh.State, fmtActions(acts))
	}
}

// commands is the scenario language, one handler per command.
func (w *world) commands() datadriven.Commands {
	cmds := datadriven.Commands{}
	for name, h := range map[string]func(*call) error{
		"live":         (*call).live,
		"leader":       (*call).leader,
		"claim":        (*call).claim,
		"renew":        (*call).renew,
		"open":         (*call).open,
		"heartbeat":    (*call).heartbeat,
		"lost":         (*call).lost,
		"entry":        (*call).entry,
		"release":      (*call).release,
		"tick":         (*call).tick,
		"fence":        (*call).fence,
		"route":        (*call).route,
		"connect-fail": (*call).connectFail,
		"force":        (*call).force,
		"prune":        (*call).prune,
		"kill":         (*call).kill,
	} {
		cmds[name] = func(a datadriven.Args) (string, error) {
			c, err := w.call(a)
			if err != nil {
				return "", err
			}
			if err := h(c); err != nil {
				return "", err
			}
			return strings.Join(c.out, "\n"), nil
		}
	}
	return cmds
}

// call reads a command line's arguments.
func (w *world) call(a datadriven.Args) (*call, error) {
	args, err := a.Keys()
	if err != nil {
		return nil, err
	}
	c := &call{w: w, args: args, repo: args["repo"], node: args["node"], now: t0}
	if c.repo != "" {
		if c.r, err = names.Parse(c.repo); err != nil {
			return nil, err
		}
	}
	if s, ok := args["at"]; ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("at=%s: %w", s, err)
		}
		c.now = t0.Add(d)
	}
	return c, nil
}

func (c *call) live() error {
	c.w.live = nil
	for _, n := range strings.Split(c.args["nodes"], ",") {
		name, wt, weighted := strings.Cut(n, ":")
		nw := NodeWeight{Node: name, Weight: 1}
		if weighted {
			if _, err := fmt.Sscan(wt, &nw.Weight); err != nil {
				return err
			}
		}
		c.w.live = append(c.w.live, nw)
	}
	c.say("live %d", len(c.w.live))
	return nil
}

func (c *call) leader() error {
	c.w.leaderUp = c.args["state"] != "down"
	c.say("leader %s", c.args["state"])
	return nil
}

func (c *call) claim() error {
	if h, ok := c.w.holders[[2]string{c.node, c.repo}]; !ok || h.State == Closed {
		c.w.holders[[2]string{c.node, c.repo}] = NewHolder(Drain)
	}
	if !c.w.leaderUp {
		c.say("claim %s: leader unreachable", c.repo)
		c.step(c.node, c.repo, Event{Kind: EvLeaderUnreachable})
		return nil
	}
	d, err := c.w.m.Claim(c.r, c.node, c.now, c.w.live, Options{Steer: c.args["steer"] == "true"})
	if err != nil {
		return err
	}
	c.say("%s", fmtDecision(d))
	c.w.granted(c.node, d)
	c.step(c.node, c.repo, EventOf(d, c.node))
	return nil
}

func (c *call) renew() error {
	repos, err := parseRepos(c.args["repos"])
	if err != nil {
		return err
	}
	if !c.w.leaderUp {
		c.say("renew: leader unreachable")
		for _, r := range repos {
			c.step(c.node, r.String(), Event{Kind: EvLeaderUnreachable})
		}
		return nil
	}
	renewed, declined := c.w.m.Renew(c.node, repos, c.now)
	c.say("renewed [%s] declined [%s]", joinRepos(renewed), joinRepos(declined))
	for _, r := range declined {
		c.step(c.node, r.String(), Event{Kind: EvRenewDeclined})
	}
	return nil
}

func (c *call) open() error {
	if !c.w.leaderUp {
		c.say("open %s: leader unreachable", c.node)
		return nil
	}
	h, err := c.w.m.Heartbeat(RenewLeases{Node: c.node, Open: true}, c.now)
	if err != nil {
		return err
	}
	s, _ := c.w.m.Session(c.node)
	c.say("session %s id=%d expires=%s write=%v", c.node, h.Reply.Session, rel(s.Expires), h.WriteSession)
	return nil
}

func (c *call) heartbeat() error {
	repos, err := parseRepos(c.args["repos"])
	if err != nil {
		return err
	}
	if !c.w.leaderUp {
		c.say("heartbeat %s: leader unreachable", c.node)
		return nil
	}
	var id uint64
	if _, err := fmt.Sscan(c.args["session"], &id); err != nil {
		return fmt.Errorf("session=%q: %w", c.args["session"], err)
	}
	h, err := c.w.m.Heartbeat(RenewLeases{Node: c.node, Session: id, Repos: repos}, c.now)
	if err != nil {
		return err
	}
	s, _ := c.w.m.Session(c.node)
	if h.Reply.SessionDeclined {
		c.say("session %s id=%d declined (current %d)", c.node, id, h.Reply.Session)
		for _, k := range c.w.sortedHolders() {
			if k[0] == c.node {
				c.step(k[0], k[1], Event{Kind: EvRenewDeclined})
			}
		}
		return nil
	}
	c.say("session %s id=%d expires=%s write=%v renewed [%s] declined [%s]", c.node, id, rel(s.Expires), h.WriteSession,
		joinRepos(h.Reply.Renewed), joinRepos(h.Reply.Declined))
	for _, r := range h.Reply.Declined {
		c.step(c.node, r.String(), Event{Kind: EvRenewDeclined})
	}
	return nil
}

func (c *call) lost() error {
	// The node's supervisor after a heartbeat: a held repo its view
	// shows granted again elsewhere closes (Lost).
	s, _ := c.w.m.Session(c.node)
	for _, k := range c.w.sortedHolders() {
		e, ok := c.w.m.Get(names.MustParse(k[1]))
		if k[0] == c.node && c.w.holders[k].State == Serving && Lost(e, ok, c.node, s.ID, c.w.epochs[k]) {
			c.say("%s lost %s to %s epoch=%d", c.node, k[1], e.Node, e.Epoch)
			c.step(k[0], k[1], Event{Kind: EvRenewDeclined})
		}
	}
	return nil
}

func (c *call) entry() error {
	e, ok := c.w.m.Get(c.r)
	if !ok {
		c.say("%s: no entry", c.repo)
		return nil
	}
	c.say("%s: %s epoch=%d session=%d expires=%s live=%v", c.repo, e.Node, e.Epoch, e.Session, rel(e.Expires), e.Live(c.now))
	return nil
}

func (c *call) release() error {
	c.step(c.node, c.repo, Event{Kind: EvReleaseStarted})
	d, err := c.w.m.Release(c.node, c.r, c.now)
	if err != nil {
		return err
	}
	c.say("%s", fmtDecision(d))
	return nil
}

func (c *call) tick() error {
	for _, k := range c.w.sortedHolders() {
		c.step(k[0], k[1], Event{Kind: EvTick})
	}
	c.say("tick %s", rel(c.now))
	return nil
}

func (c *call) fence() error {
	c.step(c.node, c.repo, Event{Kind: EvFenced})
	return nil
}

func (c *call) route() error {
	c.say("%s", Locate(c.w.m, c.r, c.node, c.now, c.now))
	return nil
}

func (c *call) connectFail() error {
	s := c.w.susp[c.node]
	if s == nil {
		s = make(Suspicions)
		c.w.susp[c.node] = s
	}
	d := OnConnectFailure(s, c.r, c.args["owner"], c.now)
	if d.Kind == Reread {
		c.say("reread at %s", rel(d.At))
	} else {
		c.say("%s", d)
	}
	return nil
}

func (c *call) force() error {
	if h, ok := c.w.holders[[2]string{c.node, c.repo}]; !ok || h.State == Closed {
		c.w.holders[[2]string{c.node, c.repo}] = NewHolder(Drain)
	}
	d, err := c.w.m.ForceGrant(c.r, c.node, c.args["dead"], c.now)
	if err != nil {
		return err
	}
	c.say("%s", fmtDecision(d))
	c.w.granted(c.node, d)
	if d.Reason == ReasonQuiet {
		// Nothing moved; the requester retries later, the claim stays open.
		return nil
	}
	c.step(c.node, c.repo, EventOf(d, c.node))
	return nil
}

func (c *call) prune() error {
	gone, err := parseRepos(c.args["gone"])
	if err != nil {
		return err
	}
	p := c.w.m.Prune(c.now, gone)
	c.say("pruned [%s] floor=%d entries=%d", joinRepos(p.Repos), p.Floor, c.w.m.Len())
	return nil
}

func (c *call) kill() error {
	for k := range c.w.holders {
		if k[0] == c.node {
			delete(c.w.holders, k)
		}
	}
	var keep LiveSet
	for _, nw := range c.w.live {
		if nw.Node != c.node {
			keep = append(keep, nw)
		}
	}
	c.w.live = keep
	c.say("killed %s", c.node)
	return nil
}

// granted records the epoch of a grant to node.
func (w *world) granted(node string, d Decision) {
	if EventOf(d, node).Kind == EvGranted {
		w.epochs[[2]string{node, d.Repo.String()}] = d.Entry.Epoch
	}
}

func (w *world) sortedHolders() [][2]string {
	keys := make([][2]string, 0, len(w.holders))
	for k := range w.holders {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	return keys
}

func fmtActions(acts []Action) string {
	parts := make([]string, 0, len(acts))
	for _, a := range acts {
		switch a.Kind {
		case ForwardTo:
			parts = append(parts, "forward="+a.Node)
		case WakeAt:
			parts = append(parts, "wake-at="+rel(a.At))
		default:
			parts = append(parts, a.Kind.String())
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtDecision(d Decision) string {
	e := d.Entry
	switch d.Outcome {
	case Granted:
		s := fmt.Sprintf("granted %s to %s epoch=%d expires=%s", d.Repo, d.Owner, e.Epoch, rel(e.Expires))
		if d.Steered {
			s += " (steered)"
		}
		return s
	case Extended:
		return fmt.Sprintf("extended %s for %s epoch=%d expires=%s", d.Repo, d.Owner, e.Epoch, rel(e.Expires))
	case Released:
		return fmt.Sprintf("released %s by %s expires=%s write=%v", d.Repo, d.Owner, rel(e.Expires), d.Write)
	}
	if d.Owner == "" {
		return fmt.Sprintf("refused %s (%s)", d.Repo, d.Reason)
	}
	return fmt.Sprintf("refused %s: owned by %s (%s)", d.Repo, d.Owner, d.Reason)
}

// parseRepos reads a comma-separated list of repositories ("" is none).
func parseRepos(list string) ([]names.Repo, error) {
	var out []names.Repo
	for _, s := range strings.FieldsFunc(list, func(c rune) bool { return c == ',' }) {
		r, err := names.Parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func joinRepos(rs []names.Repo) string {
	ss := make([]string, len(rs))
	for i, r := range rs {
		ss[i] = r.String()
	}
	return strings.Join(ss, " ")
}
