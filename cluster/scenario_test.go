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
		datadriven.RunFile(t, f, newWorld().run)
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

func (w *world) run(line string) (string, error) {
	fields := strings.Fields(line)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return "", fmt.Errorf("argument %q: want key=value", f)
		}
		args[k] = v
	}
	now := t0
	if s, ok := args["at"]; ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			return "", fmt.Errorf("at=%s: %w", s, err)
		}
		now = t0.Add(d)
	}
	var out []string
	say := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	step := func(node, repo string, ev Event) {
		k := [2]string{node, repo}
		h, ok := w.holders[k]
		if !ok {
			return
		}
		nh, acts := Step(h, ev, now)
		w.holders[k] = nh
		if nh.State != h.State || len(acts) > 0 {
			say("%s %s: %s -> %s %s", node, repo, h.State, nh.State, fmtActions(acts))
		}
	}
	rs, node := args["repo"], args["node"]
	var repo names.Repo
	if rs != "" {
		var err error
		if repo, err = names.Parse(rs); err != nil {
			return "", err
		}
	}
	switch fields[0] {
	case "live":
		w.live = nil
		for _, n := range strings.Split(args["nodes"], ",") {
			name, wt, weighted := strings.Cut(n, ":")
			nw := NodeWeight{Node: name, Weight: 1}
			if weighted {
				if _, err := fmt.Sscan(wt, &nw.Weight); err != nil {
					return "", err
				}
			}
			w.live = append(w.live, nw)
		}
		say("live %d", len(w.live))
	case "leader":
		w.leaderUp = args["state"] != "down"
		say("leader %s", args["state"])
	case "claim":
		if h, ok := w.holders[[2]string{node, rs}]; !ok || h.State == Closed {
			w.holders[[2]string{node, rs}] = NewHolder(Drain)
		}
		if !w.leaderUp {
			say("claim %s: leader unreachable", repo)
			step(node, rs, Event{Kind: EvLeaderUnreachable})
			break
		}
		d, err := w.m.Claim(repo, node, now, w.live, Options{Steer: args["steer"] == "true"})
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
		w.granted(node, d)
		step(node, rs, EventOf(d, node))
	case "renew":
		repos, err := parseRepos(args["repos"])
		if err != nil {
			return "", err
		}
		if !w.leaderUp {
			say("renew: leader unreachable")
			for _, r := range repos {
				step(node, r.String(), Event{Kind: EvLeaderUnreachable})
			}
			break
		}
		renewed, declined := w.m.Renew(node, repos, now)
		say("renewed [%s] declined [%s]", joinRepos(renewed), joinRepos(declined))
		for _, r := range declined {
			step(node, r.String(), Event{Kind: EvRenewDeclined})
		}
	case "open":
		if !w.leaderUp {
			say("open %s: leader unreachable", node)
			break
		}
		h, err := w.m.Heartbeat(RenewLeases{Node: node, Open: true}, now)
		if err != nil {
			return "", err
		}
		s, _ := w.m.Session(node)
		say("session %s id=%d expires=%s write=%v", node, h.Reply.Session, rel(s.Expires), h.WriteSession)
	case "heartbeat":
		repos, err := parseRepos(args["repos"])
		if err != nil {
			return "", err
		}
		if !w.leaderUp {
			say("heartbeat %s: leader unreachable", node)
			break
		}
		var id uint64
		if _, err := fmt.Sscan(args["session"], &id); err != nil {
			return "", fmt.Errorf("session=%q: %w", args["session"], err)
		}
		h, err := w.m.Heartbeat(RenewLeases{Node: node, Session: id, Repos: repos}, now)
		if err != nil {
			return "", err
		}
		s, _ := w.m.Session(node)
		if h.Reply.SessionDeclined {
			say("session %s id=%d declined (current %d)", node, id, h.Reply.Session)
			for _, k := range w.sortedHolders() {
				if k[0] == node {
					step(k[0], k[1], Event{Kind: EvRenewDeclined})
				}
			}
			break
		}
		say("session %s id=%d expires=%s write=%v renewed [%s] declined [%s]", node, id, rel(s.Expires), h.WriteSession,
			joinRepos(h.Reply.Renewed), joinRepos(h.Reply.Declined))
		for _, r := range h.Reply.Declined {
			step(node, r.String(), Event{Kind: EvRenewDeclined})
		}
	case "lost":
		// The node's supervisor after a heartbeat: a held repo its view
		// shows granted again elsewhere closes (Lost).
		s, _ := w.m.Session(node)
		for _, k := range w.sortedHolders() {
			e, ok := w.m.Get(rn(k[1]))
			if k[0] == node && w.holders[k].State == Serving && Lost(e, ok, node, s.ID, w.epochs[k]) {
				say("%s lost %s to %s epoch=%d", node, k[1], e.Node, e.Epoch)
				step(k[0], k[1], Event{Kind: EvRenewDeclined})
			}
		}
	case "entry":
		e, ok := w.m.Get(repo)
		if !ok {
			say("%s: no entry", repo)
			break
		}
		say("%s: %s epoch=%d session=%d expires=%s live=%v", repo, e.Node, e.Epoch, e.Session, rel(e.Expires), e.Live(now))
	case "release":
		step(node, rs, Event{Kind: EvReleaseStarted})
		d, err := w.m.Release(node, repo, now)
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
	case "tick":
		for _, k := range w.sortedHolders() {
			step(k[0], k[1], Event{Kind: EvTick})
		}
		say("tick %s", rel(now))
	case "fence":
		step(node, rs, Event{Kind: EvFenced})
	case "route":
		say("%s", Locate(w.m, repo, node, now))
	case "connect-fail":
		s := w.susp[node]
		if s == nil {
			s = make(Suspicions)
			w.susp[node] = s
		}
		d := OnConnectFailure(s, repo, args["owner"], now)
		if d.Kind == Reread {
			say("reread at %s", rel(d.At))
		} else {
			say("%s", d)
		}
	case "force":
		if h, ok := w.holders[[2]string{node, rs}]; !ok || h.State == Closed {
			w.holders[[2]string{node, rs}] = NewHolder(Drain)
		}
		d, err := w.m.ForceGrant(repo, node, args["dead"], now)
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
		w.granted(node, d)
		if d.Reason == ReasonQuiet {
			// Nothing moved; the requester retries later, the claim stays open.
			break
		}
		step(node, rs, EventOf(d, node))
	case "prune":
		gone, err := parseRepos(args["gone"])
		if err != nil {
			return "", err
		}
		p := w.m.Prune(now, gone)
		say("pruned [%s] floor=%d entries=%d", joinRepos(p.Repos), p.Floor, w.m.Len())
	case "kill":
		for k := range w.holders {
			if k[0] == node {
				delete(w.holders, k)
			}
		}
		var keep LiveSet
		for _, nw := range w.live {
			if nw.Node != node {
				keep = append(keep, nw)
			}
		}
		w.live = keep
		say("killed %s", node)
	default:
		return "", fmt.Errorf("unknown command %q", fields[0])
	}
	return strings.Join(out, "\n"), nil
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
