package gitproto

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/pktline"
)

// v2Capabilities is the protocol v2 capability advertisement after the
// agent line.
var v2Capabilities = []string{
	"ls-refs=unborn",
	"fetch=shallow wait-for-done filter ref-in-want",
	"server-option",
	"object-format=sha1",
}

func advertiseV2(c *conn, opt Options) error {
	if err := c.printf("version 2\n"); err != nil {
		return err
	}
	if err := c.printf("agent=%s\n", opt.agent()); err != nil {
		return err
	}
	for _, cp := range v2Capabilities {
		if err := c.printf("%s\n", cp); err != nil {
			return err
		}
	}
	return c.flushPkt()
}

func uploadPackV2(ctx context.Context, b Backend, c *conn, opt Options) error {
	if !opt.StatelessRPC || opt.AdvertiseOnly {
		if err := advertiseV2(c, opt); err != nil {
			return err
		}
		if opt.AdvertiseOnly {
			return nil
		}
	}
	for {
		more, err := serveV2Command(ctx, b, c, opt)
		if err != nil || !more || opt.StatelessRPC {
			return err
		}
	}
}

// serveV2Command reads and answers one command request. It returns false
// when the client ended the session (EOF or a lone flush).
func serveV2Command(ctx context.Context, b Backend, c *conn, opt Options) (bool, error) {
	l, err := c.read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, c.failRead(err)
	}
	if l.kind == pktline.Flush {
		return false, nil
	}
	cmd, ok := strings.CutPrefix(l.text, "command=")
	if l.kind != pktline.Data || !ok {
		return false, c.protoErr("", "protocol error: expected command, got %s", describe(l))
	}
	if cmd != "ls-refs" && cmd != "fetch" {
		return false, c.protoErr("", "invalid command '%s'", cmd)
	}
	// Capability section: up to a delimiter (arguments follow) or flush.
	hasArgs := false
	for {
		l, err := c.readData()
		if err != nil {
			return false, c.failRead(err)
		}
		if l.kind == pktline.Delim {
			hasArgs = true
			break
		}
		if l.kind != pktline.Data {
			break
		}
		key, val, _ := strings.Cut(l.text, "=")
		switch key {
		case "agent", "server-option", "session-id":
		case "object-format":
			if val != "sha1" {
				return false, c.protoErr("", "mismatched object format: %s", val)
			}
		default:
			return false, c.protoErr("", "unknown capability '%s'", l.text)
		}
	}
	var args []string
	if hasArgs {
		max := orDefault(opt.MaxWants, DefaultMaxWants)
		for {
			l, err := c.readData()
			if err != nil {
				return false, c.failRead(err)
			}
			if l.kind == pktline.Flush {
				break
			}
			if l.kind != pktline.Data {
				return false, c.protoErr("", "protocol error: unexpected %s in arguments", l.kind)
			}
			if len(args) >= max {
				return false, c.protoErr("", "too many arguments")
			}
			args = append(args, l.text)
		}
	}
	if cmd == "ls-refs" {
		return true, lsRefs(ctx, b, c, args)
	}
	return true, fetchV2(ctx, b, c, args)
}

// failRead reports a read error: framing errors to the client, I/O errors
// only to the caller.
func (c *conn) failRead(err error) error {
	if isProtocol(err) {
		return c.fail("protocol error: "+err.Error(), err)
	}
	return err
}

func describe(l line) string {
	if l.kind != pktline.Data {
		return l.kind.String()
	}
	return "'" + l.text + "'"
}

func lsRefs(ctx context.Context, b Backend, c *conn, args []string) error {
	var symrefs, peel, unborn bool
	var prefixes []string
	for _, a := range args {
		switch {
		case a == "symrefs":
			symrefs = true
		case a == "peel":
			peel = true
		case a == "unborn":
			unborn = true
		case strings.HasPrefix(a, "ref-prefix "):
			prefixes = append(prefixes, a[len("ref-prefix "):])
		default:
			return c.protoErr("", "unexpected line: '%s'", a)
		}
	}
	snap, err := b.Snapshot(ctx)
	if err != nil {
		return c.internalErr("ls-refs: ", fmt.Errorf("snapshot: %w", err))
	}
	ix := newRefIndex(snap)
	match := func(name string) bool {
		if len(prefixes) == 0 {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	if snap.Head != "" && match("HEAD") {
		target := ""
		if symrefs {
			target = " symref-target:" + snap.Head
		}
		if h, ok := ix.head(); ok {
			if err := c.printf("%s HEAD%s\n", h.ID, target); err != nil {
				return err
			}
		} else if unborn {
			if err := c.printf("unborn HEAD%s\n", target); err != nil {
				return err
			}
		}
	}
	for _, r := range snap.Refs {
		if !match(r.Name) {
			continue
		}
		var err error
		if peel && !r.Peeled.IsZero() {
			err = c.printf("%s %s peeled:%s\n", r.ID, r.Name, r.Peeled)
		} else {
			err = c.printf("%s %s\n", r.ID, r.Name)
		}
		if err != nil {
			return err
		}
	}
	return c.flushPkt()
}

func fetchV2(ctx context.Context, b Backend, c *conn, args []string) error {
	var a fetchArgs
	var wants []object.ID
	for _, l := range args {
		handled, err := a.parseShallowArg(l)
		if err != nil {
			return c.protoErr("", "%s", err.Error())
		}
		if handled {
			continue
		}
		switch {
		case strings.HasPrefix(l, "want "):
			id, ok := parseID(l[len("want "):])
			if !ok {
				return c.protoErr("", "protocol error: expected want object ID, got '%s'", l)
			}
			wants = append(wants, id)
		case strings.HasPrefix(l, "want-ref "):
			a.wantRefs = append(a.wantRefs, Ref{Name: l[len("want-ref "):]})
		case strings.HasPrefix(l, "have "):
			id, ok := parseID(l[len("have "):])
			if !ok {
				return c.protoErr("", "protocol error: expected have object ID, got '%s'", l)
			}
			a.haves = append(a.haves, id)
		case l == "done":
			a.done = true
		case l == "thin-pack":
			a.req.Thin = true
		case l == "ofs-delta":
			a.req.OfsDelta = true
		case l == "include-tag":
			a.req.IncludeTag = true
		case l == "no-progress":
			a.noProgress = true
		case l == "wait-for-done":
			a.waitDone = true
		default:
			return c.protoErr("", "unexpected line: '%s'", l)
		}
	}
	snap, err := b.Snapshot(ctx)
	if err != nil {
		return c.internalErr(upErrPrefix, fmt.Errorf("snapshot: %w", err))
	}
	ix := newRefIndex(snap)
	for i, wr := range a.wantRefs {
		r, ok := ix.byName[wr.Name]
		if wr.Name == "HEAD" {
			r, ok = ix.head()
			r.Name = "HEAD"
		}
		if !ok {
			return c.protoErr("", "unknown ref %s", wr.Name)
		}
		a.wantRefs[i] = r
		wants = append(wants, r.ID)
	}
	if len(wants) == 0 {
		return c.protoErr("", "fetch: no wants")
	}
	if err := a.finish(ix); err != nil {
		return c.protoErr("", "%s", err.Error())
	}
	if msg, err := checkWants(ctx, b, ix, wants); err != nil {
		return c.fail(upErrPrefix+msg, err)
	}
	a.req.Snapshot = snap
	a.req.Wants = wants
	a.req.Haves = commonHaves(ctx, b, a.haves)

	if !a.done {
		// Acknowledgments section; continue to the pack only on "ready".
		if err := c.printf("acknowledgments\n"); err != nil {
			return err
		}
		if len(a.req.Haves) == 0 {
			if err := c.printf("NAK\n"); err != nil {
				return err
			}
		}
		for _, h := range a.req.Haves {
			if err := c.printf("ACK %s\n", h); err != nil {
				return err
			}
		}
		ready := !a.waitDone && len(a.req.Haves) > 0 && b.OkToGiveUp(ctx, wants, a.req.Haves)
		if !ready {
			return c.flushPkt()
		}
		if err := c.printf("ready\n"); err != nil {
			return err
		}
		if err := c.delimPkt(); err != nil {
			return err
		}
	}

	plan, err := b.PlanFetch(ctx, a.req)
	if err != nil {
		return c.internalErr(upErrPrefix, fmt.Errorf("plan fetch: %w", err))
	}
	return sendPackV2(ctx, c, plan, &a)
}

// sendPackV2 writes the shallow-info and wanted-refs sections and the
// packfile section, in the order git's fetch-pack reads them.
func sendPackV2(ctx context.Context, c *conn, plan FetchPlan, a *fetchArgs) (err error) {
	defer func() {
		if cerr := plan.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close fetch plan: %w", cerr)
		}
	}()
	if a.req.Deepen() || len(a.req.ClientShallow) > 0 {
		if err := c.printf("shallow-info\n"); err != nil {
			return err
		}
		if err := writeShallowInfo(c, plan); err != nil {
			return err
		}
		if err := c.delimPkt(); err != nil {
			return err
		}
	}
	if len(a.wantRefs) > 0 {
		if err := c.printf("wanted-refs\n"); err != nil {
			return err
		}
		for _, r := range a.wantRefs {
			if err := c.printf("%s %s\n", r.ID, r.Name); err != nil {
				return err
			}
		}
		if err := c.delimPkt(); err != nil {
			return err
		}
	}
	if err := c.printf("packfile\n"); err != nil {
		return err
	}
	mux := c.sideband(pktline.SideBand64k)
	var progress io.Writer
	if !a.noProgress {
		progress = mux.Progress()
	}
	if err := writePack(ctx, c, plan, mux.Data(), progress); err != nil {
		return err
	}
	return c.flushPkt()
}

func writeShallowInfo(c *conn, plan FetchPlan) error {
	for _, id := range plan.Shallow() {
		if err := c.printf("shallow %s\n", id); err != nil {
			return err
		}
	}
	for _, id := range plan.Unshallow() {
		if err := c.printf("unshallow %s\n", id); err != nil {
			return err
		}
	}
	return nil
}
