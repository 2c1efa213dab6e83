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
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/datadriven"
)

// Scenario files (testdata/*.txt) drive a Cluster in fake time. Nodes are
// written n0, n1, … (rgit-0 is n0, the leader); times print as offsets
// from the start of the scenario. Commands:
//
//	start N [warm=DUR] [steer=on]
//	                       start N nodes (idle TTL DUR); placement steering
//	                       is off unless asked, as scenarios place repos by
//	                       their entry node
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
			w := &world{t: t, t0: time.Now(), sessions: map[string]*actors.Session{}, values: map[string]uint64{}}
			defer w.close()
			// Settle before every command: replies that actors send
			// asynchronously (an actor stopping after a fence) land
			// first, so the output does not depend on scheduling.
			datadriven.RunFile(t, f, func(cmd string) (string, error) {
				synctest.Wait()
				return w.run(cmd)
			})
		})
	})
}

type world struct {
	t        *testing.T
	t0       time.Time
	c        *Cluster
	sessions map[string]*actors.Session
	values   map[string]uint64 // next value per repo+ref
	bg       []chan string
	bgCmds   []string
}

func (w *world) close() {
	for _, s := range w.sessions {
		s.Release()
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

func (w *world) run(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", fmt.Errorf("empty command")
	}
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	ctx := context.Background()
	if f[0] != "start" && f[0] != "go" && f[0] != "wait" && f[0] != "tick" && w.c == nil {
		return "", fmt.Errorf("no cluster: start first")
	}
	switch f[0] {
	case "start":
		n, err := strconv.Atoi(arg(1))
		if err != nil {
			return "", err
		}
		opts := Options{Nodes: n, Steer: actors.SteerOff}
		for _, o := range f[2:] {
			k, v, _ := strings.Cut(o, "=")
			switch {
			case k == "warm":
				if opts.WarmTTL, err = time.ParseDuration(v); err != nil {
					return "", err
				}
			case o == "steer=on":
				opts.Steer = actors.SteerOn
			case o == "steer=off":
			default:
				return "", fmt.Errorf("start: unknown option %q", o)
			}
		}
		if w.c, err = New(opts); err != nil {
			return "", err
		}
		synctest.Wait()
		return fmt.Sprintf("started %d nodes, leader n0", n), nil
	case "create":
		o, nm := splitRepo(arg(1))
		return "created " + arg(1), repo.Create(ctx, w.c.Deps(), o, nm)
	case "route":
		n := w.c.Node(node(arg(1)))
		if n == nil {
			return "node down", nil
		}
		o, nm := splitRepo(arg(2))
		r, err := n.Route(ctx, o, nm)
		switch {
		case err != nil:
			return fmtErr(err), nil
		case r.Local:
			return "local", nil
		}
		return "forward " + short(r.Node), nil
	case "push":
		start := time.Now()
		v := w.next(arg(2), arg(3))
		by, epoch, err := w.c.Push(ctx, node(arg(1)), arg(2), "refs/heads/"+arg(3), v)
		if err != nil {
			return fmt.Sprintf("%s at %s after %s", fmtErr(err), short(by), time.Since(start)), nil
		}
		return fmt.Sprintf("%s=%d by %s epoch=%d after %s", arg(3), v, short(by), epoch, time.Since(start)), nil
	case "get":
		start := time.Now()
		by, v, ok, err := w.c.Get(ctx, node(arg(1)), arg(2), "refs/heads/main")
		if err != nil {
			return fmt.Sprintf("%s at %s after %s", fmtErr(err), short(by), time.Since(start)), nil
		}
		val := "none"
		if ok {
			val = strconv.FormatUint(v, 10)
		}
		return fmt.Sprintf("main=%s from %s after %s", val, short(by), time.Since(start)), nil
	case "hold":
		n := w.c.Node(node(arg(1)))
		if n == nil {
			return "node down", nil
		}
		o, nm := splitRepo(arg(2))
		s, err := n.Session(ctx, o, nm)
		if err != nil {
			return fmtErr(err), nil
		}
		w.sessions[arg(3)] = s
		return fmt.Sprintf("session %s on %s epoch=%d", arg(3), arg(1), s.Epoch), nil
	case "write":
		s, ok := w.sessions[arg(1)]
		if !ok {
			return "", fmt.Errorf("no session %s", arg(1))
		}
		key := s.Info.Owner + "/" + s.Info.Name
		v := w.next(key, arg(2))
		ref := "refs/heads/" + arg(2)
		old, _ := s.Snapshot.Ref(ref)
		res, err := s.UpdateRefs(ctx, nil, []repo.RefUpdate{{Name: ref, Old: old, New: RefID(v)}}, true)
		if err == nil {
			err = res[0]
		}
		if err != nil {
			return fmtErr(err), nil
		}
		return fmt.Sprintf("%s=%d", arg(2), v), nil
	case "end":
		if s, ok := w.sessions[arg(1)]; ok {
			s.Release()
			delete(w.sessions, arg(1))
		}
		return "ended " + arg(1), nil
	case "tick":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return "", err
		}
		time.Sleep(d)
		synctest.Wait()
		return "t=" + w.rel(), nil
	case "connects":
		limit, err := strconv.Atoi(strings.TrimPrefix(arg(3), "below="))
		if err != nil {
			return "", fmt.Errorf("connects: %q: want below=N", arg(3))
		}
		if n := w.c.Net.Attempts(node(arg(1)), node(arg(2))); n >= limit {
			return fmt.Sprintf("%d connects %s → %s, not below %d", n, arg(1), arg(2), limit), nil
		}
		return fmt.Sprintf("fewer than %d connects %s → %s", limit, arg(1), arg(2)), nil
	case "partition", "heal":
		w.c.Net.Partition(node(arg(1)), f[0] == "partition")
		return f[0] + " " + arg(1), nil
	case "kill":
		if err := w.c.Kill(node(arg(1))); err != nil {
			return "", err
		}
		return "killed " + arg(1), nil
	case "restart":
		if err := w.c.Restart(node(arg(1))); err != nil {
			return "", err
		}
		synctest.Wait()
		return "restarted " + arg(1), nil
	case "drop":
		cnt := 1
		if arg(3) != "" {
			var err error
			if cnt, err = strconv.Atoi(arg(3)); err != nil {
				return "", err
			}
		}
		w.c.Net.Drop(node(arg(1)), node(arg(2)), cnt)
		return fmt.Sprintf("dropping %d %s→%s", cnt, arg(1), arg(2)), nil
	case "delay":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return "", err
		}
		w.c.Net.SetDelay(d)
		return "delay " + d.String(), nil
	case "drain":
		n := w.c.Node(node(arg(1)))
		if n == nil {
			return "node down", nil
		}
		start := time.Now()
		if err := n.Drain(ctx); err != nil {
			return fmtErr(err), nil
		}
		return fmt.Sprintf("drained %s after %s", arg(1), time.Since(start)), nil
	case "go":
		ch := make(chan string, 1)
		rest := strings.Join(f[1:], " ")
		go func() {
			out, err := w.run(rest)
			if err != nil {
				out = "error: " + err.Error()
			}
			ch <- out
		}()
		w.bg = append(w.bg, ch)
		w.bgCmds = append(w.bgCmds, rest)
		synctest.Wait()
		return "started: " + rest, nil
	case "wait":
		var out []string
		for i, ch := range w.bg {
			out = append(out, w.bgCmds[i]+": "+<-ch)
		}
		w.bg, w.bgCmds = nil, nil
		return strings.Join(out, "\n"), nil
	case "entry":
		e, ok := w.c.Entry(node(arg(1)), arg(2))
		if !ok {
			return "no entry", nil
		}
		live := "expired"
		if e.Live(time.Now()) {
			live = "live"
		}
		return fmt.Sprintf("%s epoch=%d expires=%s (%s)", short(e.Node), e.Epoch, e.Expires.Sub(w.t0), live), nil
	case "open":
		n := w.c.Node(node(arg(1)))
		if n == nil {
			return "node down", nil
		}
		open, err := n.OpenRepos(ctx)
		if err != nil {
			return "", err
		}
		return "open [" + strings.Join(open, " ") + "]", nil
	case "refs":
		refs, err := w.c.Refs(ctx, arg(1))
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
	case "check":
		if v := w.c.Violations(); len(v) > 0 {
			return "violations: " + strings.Join(v, "; "), nil
		}
		return "one writer per epoch", nil
	}
	return "", fmt.Errorf("unknown command %q", f[0])
}

func splitRepo(s string) (string, string) {
	o, n, _ := strings.Cut(s, "/")
	return o, n
}
