package cluster

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Scenario tests: testdata/*.txt hold cases in the datadriven style
//
//	command key=value ...
//	----
//	expected output (no blank lines)
//
// separated by blank lines; '#' lines are comments. Times are offsets from
// a fixed origin (at=1.5s). Run with -rewrite to regenerate expectations.
var rewrite = flag.Bool("rewrite", os.Getenv("RGIT_REWRITE") != "", "rewrite scenario expectations")

type scenarioCase struct {
	comments []string
	cmd      string
	want     string
}

func parseScenario(t *testing.T, path string) []scenarioCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	var out []scenarioCase
	var cur scenarioCase
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "#"):
			cur.comments = append(cur.comments, l)
		default:
			cur.cmd = l
			if i+1 >= len(lines) || lines[i+1] != "----" {
				t.Fatalf("%s:%d: command without ---- separator", path, i+1)
			}
			i += 2
			var want []string
			for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
				want = append(want, lines[i])
			}
			cur.want = strings.Join(want, "\n")
			out = append(out, cur)
			cur = scenarioCase{}
		}
	}
	return out
}

func writeScenario(path string, cases []scenarioCase) error {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, cm := range c.comments {
			b.WriteString(cm + "\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n", c.cmd, c.want)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cases := parseScenario(t, f)
			w := newWorld()
			for i := range cases {
				got, err := w.run(cases[i].cmd)
				if err != nil {
					got = "error: " + err.Error()
				}
				if *rewrite {
					cases[i].want = got
				} else if got != cases[i].want {
					t.Errorf("%s\n----\ngot:\n%s\nwant:\n%s", cases[i].cmd, got, cases[i].want)
				}
			}
			if *rewrite {
				if err := writeScenario(f, cases); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// world is the cluster as the scenarios see it: the leader's map, every
// node's holders and suspicions, the live set and the leader's reachability.
type world struct {
	m        *Map
	live     LiveSet
	leaderUp bool
	holders  map[[2]string]Holder // (node, repo)
	susp     map[string]Suspicions
}

func newWorld() *world {
	return &world{m: NewMap(DefaultTimings()), leaderUp: true, holders: map[[2]string]Holder{}, susp: map[string]Suspicions{}}
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
	repo, node := args["repo"], args["node"]
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
		if h, ok := w.holders[[2]string{node, repo}]; !ok || h.State == Closed {
			w.holders[[2]string{node, repo}] = NewHolder(Drain)
		}
		if !w.leaderUp {
			say("claim %s: leader unreachable", repo)
			step(node, repo, Event{Kind: EvLeaderUnreachable})
			break
		}
		d, err := w.m.Claim(repo, node, now, w.live, Options{Steer: args["steer"] == "true"})
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
		step(node, repo, EventOf(d, node))
	case "renew":
		repos := strings.Split(args["repos"], ",")
		if !w.leaderUp {
			say("renew: leader unreachable")
			for _, r := range repos {
				step(node, r, Event{Kind: EvLeaderUnreachable})
			}
			break
		}
		renewed, declined := w.m.Renew(node, repos, now)
		say("renewed [%s] declined [%s]", strings.Join(renewed, " "), strings.Join(declined, " "))
		for _, r := range declined {
			step(node, r, Event{Kind: EvRenewDeclined})
		}
	case "release":
		step(node, repo, Event{Kind: EvReleaseStarted})
		d, err := w.m.Release(node, repo, now)
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
	case "tick":
		keys := make([][2]string, 0, len(w.holders))
		for k := range w.holders {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
		for _, k := range keys {
			step(k[0], k[1], Event{Kind: EvTick})
		}
		say("tick %s", rel(now))
	case "fence":
		step(node, repo, Event{Kind: EvFenced})
	case "route":
		say("%s", Route(w.m, repo, node, now))
	case "connect-fail":
		s := w.susp[node]
		if s == nil {
			s = make(Suspicions)
			w.susp[node] = s
		}
		d := OnConnectFailure(s, repo, args["owner"], args["method"], now)
		if d.Kind == Reread {
			say("reread at %s", rel(d.At))
		} else {
			say("%s", d)
		}
	case "force":
		if h, ok := w.holders[[2]string{node, repo}]; !ok || h.State == Closed {
			w.holders[[2]string{node, repo}] = NewHolder(Drain)
		}
		d, err := w.m.ForceGrant(repo, node, args["dead"], now)
		if err != nil {
			return "", err
		}
		say("%s", fmtDecision(d))
		if d.Reason == ReasonQuiet {
			// Nothing moved; the requester retries later, the claim stays open.
			break
		}
		step(node, repo, EventOf(d, node))
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
