package gitproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/pktline"
)

// v2Capabilities is the protocol v2 capability advertisement after the
// agent line, for b.
func v2Capabilities(b Backend) []string {
	return []string{"ls-refs=unborn", fetchCapability(b), "server-option", "object-format=sha1"}
}

// fetchCapability is the fetch line of the advertisement: with
// packfile-uris when the backend offers pack URIs.
func fetchCapability(b Backend) string {
	const base = "fetch=shallow wait-for-done filter ref-in-want"
	if offersPackURIs(b) {
		return base + " packfile-uris"
	}
	return base
}

func offersPackURIs(b Backend) bool {
	p, ok := b.(PackURIBackend)
	return ok && p.OffersPackURIs()
}

func advertiseV2(c *conn, b Backend, opt Options) error {
	if err := c.printf("version 2\n"); err != nil {
		return err
	}
	if err := c.printf("agent=%s\n", opt.agent()); err != nil {
		return err
	}
	for _, cp := range v2Capabilities(b) {
		if err := c.printf("%s\n", cp); err != nil {
			return err
		}
	}
	return c.flushPkt()
}

func uploadPackV2(ctx context.Context, b Backend, c *conn, opt Options) error {
	if !opt.StatelessRPC || opt.AdvertiseOnly {
		if err := advertiseV2(c, b, opt); err != nil {
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
// when the client ended the session (EOF or a lone flush). The whole
// request, command to last argument, arrives under one deadline.
func serveV2Command(ctx context.Context, b Backend, c *conn, opt Options) (bool, error) {
	if err := c.beginRequest(); err != nil {
		return false, err
	}
	defer c.endRequest()
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
	if cmd == "ls-refs" {
		return true, lsRefs(ctx, b, c, opt, hasArgs)
	}
	return true, fetchV2(ctx, b, c, opt, hasArgs)
}

// readV2Args streams a command's argument section (present when hasArgs)
// to f one line at a time, within the MaxArgBytes budget, and ends the
// request's deadline once it has all arrived. The line passed to f is
// valid only during the call.
func readV2Args(c *conn, opt Options, hasArgs bool, f func(arg []byte) error) error {
	defer c.endRequest()
	if !hasArgs {
		return nil
	}
	budget := argBudget{limit: opt.maxArgBytes()}
	for {
		k, p, err := c.readPkt()
		if err == io.EOF {
			err = fmt.Errorf("%w: unexpected end of request", ErrProtocol)
		}
		if err != nil {
			return c.failRead(err)
		}
		if k == pktline.Flush {
			return nil
		}
		if k != pktline.Data {
			return c.protoErr("", "protocol error: unexpected %s in arguments", k)
		}
		if le := budget.charge(len(p)); le != nil {
			return c.failLimit("", le)
		}
		if err := f(p); err != nil {
			return err
		}
	}
}

// failRead reports a read error: framing errors to the client, I/O errors
// only to the caller.
func (c *conn) failRead(err error) error {
	if le, ok := errors.AsType[*LimitError](err); ok {
		return c.failLimit("", le)
	}
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

// maxRefPrefixes is git's limit on ls-refs ref-prefix lines: beyond it
// the prefixes are ignored and every ref is listed, which is correct, only
// less filtered.
const maxRefPrefixes = 65536

func lsRefs(ctx context.Context, b Backend, c *conn, opt Options, hasArgs bool) error {
	var symrefs, peel, unborn bool
	var prefixes []string
	tooMany := false
	err := readV2Args(c, opt, hasArgs, func(arg []byte) error {
		switch a := string(arg); {
		case a == "symrefs":
			symrefs = true
		case a == "peel":
			peel = true
		case a == "unborn":
			unborn = true
		case strings.HasPrefix(a, "ref-prefix "):
			if len(prefixes) < maxRefPrefixes {
				prefixes = append(prefixes, a[len("ref-prefix "):])
			} else {
				tooMany = true
			}
		default:
			return c.protoErr("", "unexpected line: '%s'", a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if tooMany {
		prefixes = nil
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

func fetchV2(ctx context.Context, b Backend, c *conn, opt Options, hasArgs bool) error {
	r, err := readFetchV2(c, opt, hasArgs)
	if err != nil {
		return err
	}
	if !offersPackURIs(b) {
		r.args.req.PackURIProtocols = nil
	}
	a, admitted, err := negotiateV2(ctx, b, c, opt, r)
	if err != nil || admitted == nil {
		return err
	}
	defer admitted()
	plan, err := b.PlanFetch(ctx, a.req)
	if err != nil {
		return c.internalErr(upErrPrefix, fmt.Errorf("plan fetch: %w", err))
	}
	return sendPackV2(ctx, c, plan, a)
}

var havePrefix = []byte("have ")

// fetchV2Request is a v2 fetch request as read, before anything is
// looked up.
type fetchV2Request struct {
	args         fetchArgs
	wants, haves idList
}

// readFetchV2 reads and parses the fetch arguments, holding nothing but
// the request itself: the client may take its time (within the request
// deadline) without keeping other fetches from their negotiation.
func readFetchV2(c *conn, opt Options, hasArgs bool) (*fetchV2Request, error) {
	r := &fetchV2Request{}
	a, wants, haves := &r.args, &r.wants, &r.haves
	maxWants, maxHaves := opt.maxWants(), opt.maxHaves()
	err := readV2Args(c, opt, hasArgs, func(arg []byte) error {
		// Haves are most of a long request: parse them without allocating.
		if rest, ok := bytes.CutPrefix(arg, havePrefix); ok {
			id, ok := object.ParseHex(rest)
			if !ok {
				return c.protoErr("", "protocol error: expected have object ID, got '%s'", arg)
			}
			if !haves.has(id) && len(haves.ids) >= maxHaves {
				return c.failLimit("", tooManyHaves(maxHaves))
			}
			haves.add(id)
			return nil
		}
		l := string(arg)
		handled, err := a.parseShallowArg(l)
		if err != nil {
			return c.protoErr("", "%s", err.Error())
		}
		if handled {
			return nil
		}
		switch {
		case strings.HasPrefix(l, "want "):
			id, ok := object.ParseHex(l[len("want "):])
			if !ok {
				return c.protoErr("", "protocol error: expected want object ID, got '%s'", l)
			}
			if !wants.has(id) && len(wants.ids)+len(a.wantRefs) >= maxWants {
				return c.failLimit("", tooManyWants(maxWants))
			}
			wants.add(id)
		case strings.HasPrefix(l, "want-ref "):
			if len(wants.ids)+len(a.wantRefs) >= maxWants {
				return c.failLimit("", tooManyWants(maxWants))
			}
			a.wantRefs = append(a.wantRefs, Ref{Name: l[len("want-ref "):]})
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
		case strings.HasPrefix(l, "packfile-uris "):
			// Accepted whether or not it was advertised, as git does: a
			// client may have read the advertisement from another node.
			a.req.PackURIProtocols = packURIProtocols(l[len("packfile-uris "):])
		default:
			return c.protoErr("", "unexpected line: '%s'", l)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// maxPackURIProtocols bounds the schemes kept from one packfile-uris
// line; git sends at most two (http, https).
const maxPackURIProtocols = 8

// packURIProtocols splits a packfile-uris argument into its distinct
// non-empty schemes.
func packURIProtocols(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p != "" && !slices.Contains(out, p) && len(out) < maxPackURIProtocols {
			out = append(out, p)
		}
	}
	return out
}

// negotiateV2 answers a fetch request's haves. When the pack follows, it
// has been admitted (Options.AdmitPack) and admitted is the release.
// It holds a negotiation slot while it looks things up, and writes its
// answer only once the slot is given back.
func negotiateV2(ctx context.Context, b Backend, c *conn, opt Options, r *fetchV2Request) (_ *fetchArgs, admitted func(), err error) {
	release, err := opt.acquire(ctx)
	if err != nil {
		return nil, nil, c.failBusy(opt, err)
	}
	c.hold()
	a, send, err := decideV2(ctx, b, c, r)
	release()
	if err == nil && send {
		if admitted, err = opt.admitPack(); err != nil {
			c.discard()
			return nil, nil, c.failBusy(opt, err)
		}
	}
	if eerr := c.emit(); err == nil {
		err = eerr
	}
	if err != nil && admitted != nil {
		admitted()
		admitted = nil
	}
	return a, admitted, err
}

// decideV2 is negotiateV2's work under the slot; its output is held.
func decideV2(ctx context.Context, b Backend, c *conn, r *fetchV2Request) (_ *fetchArgs, send bool, _ error) {
	a, wants := &r.args, &r.wants
	snap, err := b.Snapshot(ctx)
	if err != nil {
		return nil, false, c.internalErr(upErrPrefix, fmt.Errorf("snapshot: %w", err))
	}
	ix := newRefIndex(snap)
	for i, wr := range a.wantRefs {
		r, ok := ix.byName[wr.Name]
		if wr.Name == "HEAD" {
			r, ok = ix.head()
			r.Name = "HEAD"
		}
		if !ok {
			return nil, false, c.protoErr("", "unknown ref %s", wr.Name)
		}
		a.wantRefs[i] = r
		wants.add(r.ID) // counted against MaxWants as a want-ref
	}
	if len(wants.ids) == 0 {
		return nil, false, c.protoErr("", "fetch: no wants")
	}
	if err := a.finish(ix); err != nil {
		return nil, false, c.protoErr("", "%s", err.Error())
	}
	if msg, err := checkWants(ctx, b, ix, wants.ids); err != nil {
		return nil, false, c.fail(upErrPrefix+msg, err)
	}
	a.req.Snapshot = snap
	a.req.Wants = wants.ids
	a.req.Haves = commonHaves(ctx, b, r.haves.ids)
	if a.done {
		return a, true, nil
	}
	// Acknowledgments section; continue to the pack only on "ready".
	if err := c.printf("acknowledgments\n"); err != nil {
		return nil, false, err
	}
	if len(a.req.Haves) == 0 {
		if err := c.printf("NAK\n"); err != nil {
			return nil, false, err
		}
	}
	for _, h := range a.req.Haves {
		if err := c.printf("ACK %s\n", h); err != nil {
			return nil, false, err
		}
	}
	ready := !a.waitDone && len(a.req.Haves) > 0 && b.OkToGiveUp(ctx, a.req.Wants, a.req.Haves)
	if !ready {
		return nil, false, c.flushPkt()
	}
	if err := c.printf("ready\n"); err != nil {
		return nil, false, err
	}
	return a, true, c.delimPkt()
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
	if err := writePackURIs(c, plan); err != nil {
		return err
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

// writePackURIs writes the packfile-uris section when the plan names
// packs the client downloads itself.
func writePackURIs(c *conn, plan FetchPlan) error {
	p, ok := plan.(PackURIPlan)
	if !ok {
		return nil
	}
	uris := p.PackURIs()
	if len(uris) == 0 {
		return nil
	}
	if err := c.printf("packfile-uris\n"); err != nil {
		return err
	}
	for _, u := range uris {
		if err := c.printf("%s %s\n", u.Hash, u.URI); err != nil {
			return err
		}
	}
	return c.delimPkt()
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
