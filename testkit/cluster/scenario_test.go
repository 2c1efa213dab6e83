package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/datadriven"
	"github.com/rgit/rgit/testkit/faultstore"
)

// Scenario files (testdata/*.txt) drive a Cluster in fake time. Nodes are
// written n0, n1, … (rgit-0 is n0, the leader); times print as offsets
// from the start of the scenario. Commands:
//
//	start N [warm=DUR] [steer=on] [rebalance=M]
//	                       start N nodes (idle TTL DUR); placement steering
//	                       is off unless asked, as scenarios place repos by
//	                       their entry node; so is rebalancing (M moves at
//	                       once)
//	create R               create repository R in the store
//	route nX R             Route at nX: local, forward nY, or the error
//	push nX R REF          set REF to the next value through nX (POST)
//	get nX R               read refs/heads/main through nX (GET)
//	hold nX R S            open session S at nX (routes; must be local)
//	write S REF            commit REF's next value through held session S
//	end S                  release session S
//	tick DUR               let DUR of fake time pass
//	partition nX / heal nX / kill nX / restart nX
//	drop nX nY [N]         fail the next N connects nX → nY
//	drain nX               Node.Drain at nX
//	store hang|outage|up   the object store hangs (every call waits for
//	                       its deadline or the end), fails every call at
//	                       once, or answers again
//	delay DUR              latency of every simulated connect (and so of
//	                       every forward and leader call); 0 turns it off
//	go CMD…                run CMD in the background; "wait" prints results
//	connects nX nY below=N whether fewer than N connects nX → nY were
//	                       attempted so far
//	entry nX R             R's ownership entry in nX's view
//	open nX                repositories open at nX
//	refs R                 R's refs as durable in the store
//	check                  no two writers committed in one epoch
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, f string) {
		synctest.Test(t, func(t *testing.T) {
			w := &world{t: t, t0: time.Now(), sessions: map[string]*actors.RepoSession{}, values: map[string]uint64{}}
			w.cmds = w.commands()
			defer w.close()
			// Settle before every command: replies that actors send
			// asynchronously (an actor stopping after a fence) land
			// first, so the output does not depend on scheduling.
			datadriven.RunFile(t, f, func(cmd string) (string, error) {
				synctest.Wait()
				return w.cmds.Run(cmd)
			})
		})
	})
}

type world struct {
	t        *testing.T
	t0       time.Time
	c        *Cluster
	sessions map[string]*actors.RepoSession
	values   map[string]uint64 // next value per repo+ref
	bg       []chan string
	bgCmds   []string
	cmds     datadriven.Commands // go runs its command through them
	hang     *faultstore.Gate    // the store hangs while set
}

func (w *world) close() {
	for _, s := range w.sessions {
		s.Release()
	}
	if w.hang != nil {
		w.hang.Release()
	}
	for _, ch := range w.bg {
		<-ch
	}
	if w.c != nil {
		w.c.Close()
	}
	settle()
}

// settle lets fake time run past the last dead letter and protoactor's
// dead-letter throttle, whose goroutine waits on a 1 s ticker: a bubble
// must end with no goroutine left. A renewal batch in flight at shutdown
// (nodes send one every RenewEvery, idle or not) gives up after
// RenewEvery and then reports to its stopped supervisor, a dead letter.
func settle() { time.Sleep(rc.RenewEvery + 2*time.Second) }

func (w *world) rel() string { return time.Since(w.t0).String() }

// node maps n3 to rgit-3; short maps back.
func node(s string) string { return "rgit-" + strings.TrimPrefix(s, "n") }
func short(s string) string {
	if rest, ok := strings.CutPrefix(s, "rgit-"); ok {
		return "n" + rest
	}
	return s
}

// fmtErr prints an error as the front end would classify it.
func fmtErr(err error) string {
	var no *actors.NotOwnerError
	switch {
	case errors.Is(err, actors.ErrLeaderUnreachable):
		return "503 leader unreachable"
	case errors.Is(err, actors.ErrDraining):
		return "503 draining"
	case errors.Is(err, actors.ErrOwnerUnreachable), errors.Is(err, ErrConnect):
		return "502 owner unreachable"
	case errors.As(err, &no):
		return "not owner: " + short(no.Node)
	case errors.Is(err, ErrNodeDown):
		return "node down"
	case errors.Is(err, refdb.ErrFenced):
		return "fenced, not acknowledged"
	}
	return err.Error()
}

func (w *world) next(repoName, ref string) uint64 {
	k := repoName + " " + ref
	w.values[k]++
	return w.values[k]
}

// commands is the scenario language, one handler per command; all but
// start, go, wait and tick need a started cluster.
func (w *world) commands() datadriven.Commands {
	cmds := datadriven.Commands{}
	for name, h := range map[string]datadriven.Handler{
		"start":     w.start,
		"create":    w.create,
		"route":     w.route,
		"push":      w.push,
		"get":       w.get,
		"hold":      w.hold,
		"write":     w.write,
		"end":       w.end,
		"tick":      w.tick,
		"connects":  w.connects,
		"partition": w.partition,
		"heal":      w.partition,
		"kill":      w.kill,
		"restart":   w.restart,
		"drop":      w.drop,
		"delay":     w.delay,
		"store":     w.store,
		"drain":     w.drain,
		"go":        w.goCmd,
		"wait":      w.wait,
		"entry":     w.entry,
		"open":      w.open,
		"refs":      w.refs,
		"check":     w.check,
	} {
		cmds[name] = h
		if name != "start" && name != "go" && name != "wait" && name != "tick" {
			cmds[name] = func(a datadriven.Args) (string, error) {
				if w.c == nil {
					return "", fmt.Errorf("no cluster: start first")
				}
				return h(a)
			}
		}
	}
	return cmds
}

func (w *world) start(a datadriven.Args) (string, error) {
	n, err := strconv.Atoi(a.At(1))
	if err != nil {
		return "", err
	}
	opts := Options{Nodes: n, Steer: actors.SteerOff}
	for _, o := range a[2:] {
		k, v, _ := strings.Cut(o, "=")
		switch {
		case k == "warm":
			if opts.WarmTTL, err = time.ParseDuration(v); err != nil {
				return "", err
			}
		case o == "steer=on":
			opts.Steer = actors.SteerOn
		case o == "steer=off":
		case k == "rebalance":
			if opts.Rebalance, err = strconv.Atoi(v); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("start: unknown option %q", o)
		}
	}
	if w.c, err = New(opts); err != nil {
		return "", err
	}
	synctest.Wait()
	return fmt.Sprintf("started %d nodes, leader n0", n), nil
}

func (w *world) create(a datadriven.Args) (string, error) {
	ctx := context.Background()
	r, err := names.Parse(a.At(1))
	if err != nil {
		return "", err
	}
	return "created " + a.At(1), repo.Create(ctx, w.c.Deps(), r)
}

func (w *world) route(a datadriven.Args) (string, error) {
	ctx := context.Background()
	n := w.c.Node(node(a.At(1)))
	if n == nil {
		return "node down", nil
	}
	o, nm := splitRepo(a.At(2))
	r, err := n.Route(ctx, names.MustParse(o+"/"+nm))
	switch {
	case err != nil:
		return fmtErr(err), nil
	case r.Local:
		return "local", nil
	}
	return "forward " + short(r.Node), nil
}

func (w *world) push(a datadriven.Args) (string, error) {
	ctx := context.Background()
	start := time.Now()
	v := w.next(a.At(2), a.At(3))
	by, epoch, err := w.c.Push(ctx, node(a.At(1)), a.At(2), "refs/heads/"+a.At(3), v)
	if err != nil {
		return fmt.Sprintf("%s at %s after %s", fmtErr(err), short(by), time.Since(start)), nil
	}
	return fmt.Sprintf("%s=%d by %s epoch=%d after %s", a.At(3), v, short(by), epoch, time.Since(start)), nil
}

func (w *world) get(a datadriven.Args) (string, error) {
	ctx := context.Background()
	start := time.Now()
	by, v, ok, err := w.c.Get(ctx, node(a.At(1)), a.At(2), "refs/heads/main")
	if err != nil {
		return fmt.Sprintf("%s at %s after %s", fmtErr(err), short(by), time.Since(start)), nil
	}
	val := "none"
	if ok {
		val = strconv.FormatUint(v, 10)
	}
	return fmt.Sprintf("main=%s from %s after %s", val, short(by), time.Since(start)), nil
}

func (w *world) hold(a datadriven.Args) (string, error) {
	ctx := context.Background()
	n := w.c.Node(node(a.At(1)))
	if n == nil {
		return "node down", nil
	}
	o, nm := splitRepo(a.At(2))
	s, err := n.Session(ctx, names.MustParse(o+"/"+nm))
	if err != nil {
		return fmtErr(err), nil
	}
	w.sessions[a.At(3)] = s
	return fmt.Sprintf("session %s on %s epoch=%d", a.At(3), a.At(1), s.Epoch), nil
}

func (w *world) write(a datadriven.Args) (string, error) {
	ctx := context.Background()
	s, ok := w.sessions[a.At(1)]
	if !ok {
		return "", fmt.Errorf("no session %s", a.At(1))
	}
	key := s.Info.Repo.String()
	v := w.next(key, a.At(2))
	ref := "refs/heads/" + a.At(2)
	old, _ := s.Snapshot.Ref(ref)
	res, err := s.UpdateRefs(ctx, nil, []repo.RefUpdate{{Name: ref, Old: old, New: RefID(v)}}, true)
	if err == nil {
		err = res[0]
	}
	if err != nil {
		return fmtErr(err), nil
	}
	return fmt.Sprintf("%s=%d", a.At(2), v), nil
}

func (w *world) end(a datadriven.Args) (string, error) {
	if s, ok := w.sessions[a.At(1)]; ok {
		s.Release()
		delete(w.sessions, a.At(1))
	}
	return "ended " + a.At(1), nil
}

func (w *world) tick(a datadriven.Args) (string, error) {
	d, err := time.ParseDuration(a.At(1))
	if err != nil {
		return "", err
	}
	time.Sleep(d)
	synctest.Wait()
	return "t=" + w.rel(), nil
}

func (w *world) connects(a datadriven.Args) (string, error) {
	limit, err := strconv.Atoi(strings.TrimPrefix(a.At(3), "below="))
	if err != nil {
		return "", fmt.Errorf("connects: %q: want below=N", a.At(3))
	}
	if n := w.c.Net.Attempts(node(a.At(1)), node(a.At(2))); n >= limit {
		return fmt.Sprintf("%d connects %s → %s, not below %d", n, a.At(1), a.At(2), limit), nil
	}
	return fmt.Sprintf("fewer than %d connects %s → %s", limit, a.At(1), a.At(2)), nil
}

func (w *world) partition(a datadriven.Args) (string, error) {
	w.c.Net.Partition(node(a.At(1)), a[0] == "partition")
	return a[0] + " " + a.At(1), nil
}

func (w *world) store(a datadriven.Args) (string, error) {
	switch a.At(1) {
	case "hang":
		if w.hang == nil {
			w.hang = w.c.Store.Hold(faultstore.AllOps, "")
		}
	case "outage":
		w.c.Store.SetOutage(true)
	case "up":
		w.c.Store.SetOutage(false)
		if w.hang != nil {
			w.hang.Release()
			w.hang = nil
		}
	default:
		return "", fmt.Errorf("store: want hang, outage or up, got %q", a.At(1))
	}
	return "store " + a.At(1), nil
}

func (w *world) kill(a datadriven.Args) (string, error) {
	if err := w.c.Kill(node(a.At(1))); err != nil {
		return "", err
	}
	return "killed " + a.At(1), nil
}

func (w *world) restart(a datadriven.Args) (string, error) {
	if err := w.c.Restart(node(a.At(1))); err != nil {
		return "", err
	}
	synctest.Wait()
	return "restarted " + a.At(1), nil
}

func (w *world) drop(a datadriven.Args) (string, error) {
	cnt := 1
	if a.At(3) != "" {
		var err error
		if cnt, err = strconv.Atoi(a.At(3)); err != nil {
			return "", err
		}
	}
	w.c.Net.Drop(node(a.At(1)), node(a.At(2)), cnt)
	return fmt.Sprintf("dropping %d %s→%s", cnt, a.At(1), a.At(2)), nil
}

func (w *world) delay(a datadriven.Args) (string, error) {
	d, err := time.ParseDuration(a.At(1))
	if err != nil {
		return "", err
	}
	w.c.Net.SetDelay(d)
	return "delay " + d.String(), nil
}

func (w *world) drain(a datadriven.Args) (string, error) {
	ctx := context.Background()
	n := w.c.Node(node(a.At(1)))
	if n == nil {
		return "node down", nil
	}
	start := time.Now()
	if err := n.Drain(ctx); err != nil {
		return fmtErr(err), nil
	}
	return fmt.Sprintf("drained %s after %s", a.At(1), time.Since(start)), nil
}

func (w *world) goCmd(a datadriven.Args) (string, error) {
	ch := make(chan string, 1)
	rest := strings.Join(a[1:], " ")
	go func() {
		out, err := w.cmds.Run(rest)
		if err != nil {
			out = "error: " + err.Error()
		}
		ch <- out
	}()
	w.bg = append(w.bg, ch)
	w.bgCmds = append(w.bgCmds, rest)
	synctest.Wait()
	return "started: " + rest, nil
}

func (w *world) wait(a datadriven.Args) (string, error) {
	var out []string
	for i, ch := range w.bg {
		out = append(out, w.bgCmds[i]+": "+<-ch)
	}
	w.bg, w.bgCmds = nil, nil
	return strings.Join(out, "\n"), nil
}

func (w *world) entry(a datadriven.Args) (string, error) {
	e, ok := w.c.Entry(node(a.At(1)), a.At(2))
	if !ok {
		return "no entry", nil
	}
	live := "expired"
	if e.Live(time.Now()) {
		live = "live"
	}
	return fmt.Sprintf("%s epoch=%d expires=%s (%s)", short(e.Node), e.Epoch, e.Expires.Sub(w.t0), live), nil
}

func (w *world) open(a datadriven.Args) (string, error) {
	ctx := context.Background()
	n := w.c.Node(node(a.At(1)))
	if n == nil {
		return "node down", nil
	}
	open, err := n.OpenRepos(ctx)
	if err != nil {
		return "", err
	}
	return "open [" + strings.Join(open, " ") + "]", nil
}

func (w *world) refs(a datadriven.Args) (string, error) {
	ctx := context.Background()
	refs, err := w.c.Refs(ctx, a.At(1))
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(refs))
	for k := range refs {
		names = append(names, k)
	}
	slices.Sort(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "refs/heads/"), refs[k]))
	}
	return strings.Join(parts, " "), nil
}

func (w *world) check(a datadriven.Args) (string, error) {
	if v := w.c.Violations(); len(v) > 0 {
		return "violations: " + strings.Join(v, "; "), nil
	}
	return "one writer per epoch", nil
}

func splitRepo(s string) (string, string) {
	o, n, _ := strings.Cut(s, "/")
	return o, n
}
