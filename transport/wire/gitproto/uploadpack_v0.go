package gitproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// v0UploadCapabilities follow the first advertised ref (before agent and
// symref).
var v0UploadCapabilities = []string{
	"multi_ack", "thin-pack", "side-band", "side-band-64k", "ofs-delta",
	"shallow", "deepen-since", "deepen-not", "deepen-relative", "no-progress",
	"include-tag", "multi_ack_detailed", "allow-tip-sha1-in-want",
	"allow-reachable-sha1-in-want", "no-done", "filter", "object-format=sha1",
}

func isProtocol(err error) bool { return errors.Is(err, ErrProtocol) }

// advertiseRefsV0 writes a v0/v1 advertisement: the "version 1" line when
// asked, then refs with capabilities after a NUL on the first line (or the
// capabilities^{} placeholder for an empty list), then a flush.
func advertiseRefsV0(c *conn, version int, refs []Ref, caps string, withPeeled bool) error {
	if version == 1 {
		if err := c.printf("version 1\n"); err != nil {
			return err
		}
	}
	if len(refs) == 0 {
		if err := c.printf("%s capabilities^{}\x00%s\n", object.ZeroID, caps); err != nil {
			return err
		}
		return c.flushPkt()
	}
	for i, r := range refs {
		var err error
		if i == 0 {
			err = c.printf("%s %s\x00%s\n", r.ID, r.Name, caps)
		} else {
			err = c.printf("%s %s\n", r.ID, r.Name)
		}
		if err != nil {
			return err
		}
		if withPeeled && !r.Peeled.IsZero() {
			if err := c.printf("%s %s^{}\n", r.Peeled, r.Name); err != nil {
				return err
			}
		}
	}
	return c.flushPkt()
}

func uploadPackV0(ctx context.Context, b Backend, c *conn, opt Options) error {
	snap, err := b.Snapshot(ctx)
	if err != nil {
		return c.internalErr(upErrPrefix, fmt.Errorf("snapshot: %w", err))
	}
	ix := newRefIndex(snap)
	if !opt.StatelessRPC || opt.AdvertiseOnly {
		refs := snap.Refs
		caps := strings.Join(v0UploadCapabilities, " ")
		if h, ok := ix.head(); ok {
			refs = append([]Ref{{Name: "HEAD", ID: h.ID}}, refs...)
			caps += " symref=HEAD:" + snap.Head
		}
		caps += " agent=" + opt.agent()
		if err := advertiseRefsV0(c, opt.Protocol, refs, caps, true); err != nil {
			return err
		}
		if opt.AdvertiseOnly {
			return nil
		}
	}
	s := &v0session{b: b, c: c, opt: opt, ix: ix}
	return s.run(ctx)
}

// v0session is one v0/v1 upload-pack exchange.
type v0session struct {
	b   Backend
	c   *conn
	opt Options
	ix  *refIndex

	args       fetchArgs
	multiAck   int // 0 none, 1 multi_ack, 2 multi_ack_detailed
	noDone     bool
	sideband   pktline.SidebandMode
	common     []object.ID
	seen       map[object.ID]bool // every have so far: whether it is common
	sentReady  bool
	gotCommon  bool
	gotOther   bool
	lastCommon object.ID
	wants      idList
	budget     argBudget // the want list's and have lines' MaxArgBytes
	// okChecked is len(common) at the last OkToGiveUp answer, gaveUp that
	// answer: it only turns true as common grows, so it is asked again
	// only then, not once per have.
	okChecked int
	gaveUp    bool
}

func (s *v0session) run(ctx context.Context) error {
	admitted, err := s.negotiateAll(ctx)
	if err != nil || admitted == nil {
		return err
	}
	defer admitted()
	s.args.req.Haves = s.common
	plan, err := s.b.PlanFetch(ctx, s.args.req)
	if err != nil {
		return s.c.internalErr(upErrPrefix, fmt.Errorf("plan fetch: %w", err))
	}
	return sendPackV0(ctx, s.c, plan, s.sideband, s.args.noProgress)
}

// negotiateAll reads the wants, sends the shallow list and negotiates.
// When the pack follows, it has been admitted (Options.AdmitPack) and
// admitted is the release. Every request (the want list, each round of
// haves) is read whole before the work on it takes a negotiation slot,
// and its answer is written after the slot is given back: no slot is held
// while the client is waited for.
func (s *v0session) negotiateAll(ctx context.Context) (admitted func(), err error) {
	s.budget = argBudget{limit: s.opt.maxArgBytes()}
	done, err := s.readWants()
	if err != nil || done {
		return nil, err
	}
	err = s.withSlot(ctx, s.planWants)
	if eerr := s.c.emit(); err == nil {
		err = eerr
	}
	if err != nil {
		return nil, err
	}
	return s.negotiate(ctx)
}

// withSlot runs work under a negotiation slot with the output held; the
// caller emits it.
func (s *v0session) withSlot(ctx context.Context, work func(context.Context) error) error {
	release, err := s.opt.acquire(ctx)
	if err != nil {
		return s.c.failBusy(s.opt, err)
	}
	defer release()
	s.c.hold()
	return work(ctx)
}

// planWants checks the wants and writes the shallow list of a deepening
// fetch.
func (s *v0session) planWants(ctx context.Context) error {
	if msg, err := checkWants(ctx, s.b, s.ix, s.wants.ids); err != nil {
		return s.c.fail(upErrPrefix+msg, err)
	}
	if err := s.args.finish(s.ix); err != nil {
		return s.c.protoErr(upErrPrefix, "%s", err.Error())
	}
	s.args.req.Snapshot = s.ix.snap
	s.args.req.Wants = s.wants.ids
	if !s.args.req.Deepen() {
		return nil
	}
	// The shallow list precedes negotiation; it depends only on the
	// wants and the depth, so a plan without haves gives it.
	plan, err := s.b.PlanFetch(ctx, s.args.req)
	if err != nil {
		return s.c.internalErr(upErrPrefix, fmt.Errorf("plan shallow: %w", err))
	}
	err = writeShallowInfo(s.c, plan)
	if cerr := plan.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close fetch plan: %w", cerr)
	}
	if err != nil {
		return err
	}
	return s.c.flushPkt()
}

// readWants reads the want list and shallow/deepen lines up to the flush.
// done is true when the client wants nothing (ls-remote, or nothing new).
func (s *v0session) readWants() (done bool, err error) {
	c := s.c
	maxWants := s.opt.maxWants()
	if err := c.beginRequest(); err != nil {
		return true, err
	}
	defer c.endRequest()
	for first := true; ; first = false {
		l, err := c.read()
		if err == io.EOF && first {
			return true, nil
		}
		if err == io.EOF {
			err = fmt.Errorf("%w: unexpected end of want list", ErrProtocol)
		}
		if err != nil {
			return true, c.failRead(err)
		}
		if l.kind == pktline.Flush {
			return len(s.wants.ids) == 0, nil
		}
		if l.kind != pktline.Data {
			return true, c.protoErr(upErrPrefix, "protocol error: unexpected %s", l.kind)
		}
		if le := s.budget.charge(len(l.text)); le != nil {
			return true, c.failLimit(upErrPrefix, le)
		}
		if rest, ok := strings.CutPrefix(l.text, "want "); ok {
			idText, caps, hasCaps := strings.Cut(rest, " ")
			id, ok := object.ParseHex(idText)
			if !ok {
				return true, c.protoErr(upErrPrefix, "protocol error, expected to get object ID, not '%s'", l.text)
			}
			if hasCaps && len(s.wants.ids) == 0 {
				s.parseCaps(caps)
			}
			if !s.wants.has(id) && len(s.wants.ids) >= maxWants {
				return true, c.failLimit(upErrPrefix, tooManyWants(maxWants))
			}
			s.wants.add(id)
			continue
		}
		handled, perr := s.args.parseShallowArg(l.text)
		if perr != nil {
			return true, c.protoErr(upErrPrefix, "%s", perr.Error())
		}
		if !handled {
			return true, c.protoErr(upErrPrefix, "protocol error, expected to get object ID, not '%s'", l.text)
		}
	}
}

func (s *v0session) parseCaps(caps string) {
	for _, cp := range strings.Fields(caps) {
		switch cp {
		case "multi_ack":
			s.multiAck = max(s.multiAck, 1)
		case "multi_ack_detailed":
			s.multiAck = 2
		case "no-done":
			s.noDone = true
		case "side-band":
			if s.sideband == 0 {
				s.sideband = pktline.SideBand
			}
		case "side-band-64k":
			s.sideband = pktline.SideBand64k
		case "thin-pack":
			s.args.req.Thin = true
		case "ofs-delta":
			s.args.req.OfsDelta = true
		case "include-tag":
			s.args.req.IncludeTag = true
		case "no-progress":
			s.args.noProgress = true
		case "deepen-relative":
			s.args.req.DeepenRelative = true
		}
	}
}

// haveRound is one round of have lines as read: its distinct ids in the
// order they first appear, where each last appears, and how it ended.
type haveRound struct {
	ids  []object.ID
	last map[object.ID]int // line number of each id's last occurrence
	new  int               // ids not seen in an earlier round
	done bool              // ended by "done" rather than a flush
	eof  bool              // the client ended the session instead
}

// readRound reads one round of haves up to its flush or "done", under the
// request deadline. Repeated lines cost nothing more to hold.
func (s *v0session) readRound() (*haveRound, error) {
	c := s.c
	if err := c.beginRequest(); err != nil {
		return nil, err
	}
	defer c.endRequest()
	r := &haveRound{last: make(map[object.ID]int)}
	maxHaves := s.opt.maxHaves()
	for line := 0; ; line++ {
		k, p, err := c.readPkt()
		if err == io.EOF && line == 0 {
			r.eof = true
			return r, nil
		}
		if err == io.EOF {
			return nil, fmt.Errorf("%w: unexpected end of have list", ErrProtocol)
		}
		if err != nil {
			return nil, c.failRead(err)
		}
		if le := s.budget.charge(len(p)); le != nil {
			return nil, c.failLimit(upErrPrefix, le)
		}
		switch {
		case k == pktline.Flush:
			return r, nil
		case k != pktline.Data:
			return nil, c.protoErr(upErrPrefix, "protocol error: unexpected %s", k)
		case bytes.HasPrefix(p, havePrefix):
			id, ok := object.ParseHex(p[len(havePrefix):])
			if !ok {
				return nil, c.protoErr(upErrPrefix, "protocol error, expected to get object ID, not '%s'", p)
			}
			if _, inRound := r.last[id]; !inRound {
				if _, seen := s.seen[id]; !seen {
					if len(s.seen)+r.new >= maxHaves {
						return nil, c.failLimit(upErrPrefix, tooManyHaves(maxHaves))
					}
					r.new++
				}
				r.ids = append(r.ids, id)
			}
			r.last[id] = line
		case string(p) == "done":
			r.done = true
			return r, nil
		default:
			return nil, c.protoErr(upErrPrefix, "git upload-pack: expected SHA1 list, got '%s'", p)
		}
	}
}

// negotiate runs git's get_common_commits over the rounds of have lines.
// When the pack follows, it returns the admission's release.
func (s *v0session) negotiate(ctx context.Context) (admitted func(), err error) {
	s.seen = make(map[object.ID]bool)
	for {
		r, err := s.readRound()
		if err != nil {
			return nil, err
		}
		if r.eof {
			// A stateless client may stop after the want list.
			if s.opt.StatelessRPC && len(s.seen) == 0 {
				return nil, nil
			}
			return nil, fmt.Errorf("%w: unexpected end of have list", ErrProtocol)
		}
		var send, stop bool
		err = s.withSlot(ctx, func(ctx context.Context) error {
			var err error
			send, stop, err = s.answerRound(ctx, r)
			return err
		})
		if err == nil && send {
			if admitted, err = s.opt.admitPack(); err != nil {
				s.c.discard()
				return nil, s.c.failBusy(s.opt, err)
			}
		}
		if eerr := s.c.emit(); err == nil {
			err = eerr
		}
		if err != nil {
			if admitted != nil {
				admitted()
			}
			return nil, err
		}
		if stop {
			return admitted, nil
		}
	}
}

// answerRound answers one round: each have as git does (have), then its
// flush or "done". stop is true when the negotiation is over, send when
// the pack follows.
func (s *v0session) answerRound(ctx context.Context, r *haveRound) (send, stop bool, err error) {
	c := s.c
	last, lastCommon := -1, object.ID{}
	for _, id := range r.ids {
		if err := s.have(ctx, id); err != nil {
			return false, true, err
		}
		if s.seen[id] && r.last[id] > last {
			last, lastCommon = r.last[id], id
		}
	}
	if last >= 0 {
		// git's last common is the round's last common line.
		s.lastCommon = lastCommon
	}
	if r.done {
		if len(s.common) > 0 {
			if s.multiAck > 0 {
				return true, true, c.printf("ACK %s\n", s.lastCommon)
			}
			return true, true, nil
		}
		return true, true, c.printf("NAK\n")
	}
	if s.multiAck == 2 && s.gotCommon && !s.gotOther && s.okToGiveUp(ctx) {
		s.sentReady = true
		if err := c.printf("ACK %s ready\n", s.lastCommon); err != nil {
			return false, true, err
		}
	}
	if len(s.common) == 0 || s.multiAck > 0 {
		if err := c.printf("NAK\n"); err != nil {
			return false, true, err
		}
	}
	if s.noDone && s.sentReady {
		return true, true, c.printf("ACK %s\n", s.lastCommon)
	}
	if s.opt.StatelessRPC {
		return false, true, nil
	}
	s.gotCommon, s.gotOther = false, false
	return false, false, nil
}

// have answers one have line as git's get_common_commits does, except that
// a have seen before in this negotiation is not answered again: the answer
// could not differ, and repeating it would let a request of repeated lines
// grow the response without bound. It still counts for the round, as in
// git. A round's repeats are answered once (readRound), the round's last
// common line set by answerRound.
func (s *v0session) have(ctx context.Context, id object.ID) error {
	c := s.c
	common, dup := s.seen[id]
	if !dup {
		common = s.b.HasCommit(ctx, id)
		s.seen[id] = common
	}
	if !common {
		s.gotOther = true
		if !dup && s.multiAck > 0 && s.okToGiveUp(ctx) {
			if s.multiAck == 2 {
				s.sentReady = true
				return c.printf("ACK %s ready\n", id)
			}
			return c.printf("ACK %s continue\n", id)
		}
		return nil
	}
	s.gotCommon = true
	s.lastCommon = id
	if dup {
		return nil
	}
	s.common = append(s.common, id)
	switch {
	case s.multiAck == 2:
		return c.printf("ACK %s common\n", id)
	case s.multiAck == 1:
		return c.printf("ACK %s continue\n", id)
	case len(s.common) == 1:
		return c.printf("ACK %s\n", id)
	}
	return nil
}

func (s *v0session) okToGiveUp(ctx context.Context) bool {
	if !s.gaveUp && len(s.common) > s.okChecked {
		s.okChecked = len(s.common)
		s.gaveUp = s.b.OkToGiveUp(ctx, s.wants.ids, s.common)
	}
	return s.gaveUp
}

// sendPackV0 streams the pack raw or inside side-band packets followed by
// a flush.
func sendPackV0(ctx context.Context, c *conn, plan FetchPlan, mode pktline.SidebandMode, noProgress bool) (err error) {
	defer func() {
		if cerr := plan.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close fetch plan: %w", cerr)
		}
	}()
	if mode == 0 {
		return writePack(ctx, c, plan, c.out, nil)
	}
	mux := c.sideband(mode)
	var progress io.Writer
	if !noProgress {
		progress = mux.Progress()
	}
	if err := writePack(ctx, c, plan, mux.Data(), progress); err != nil {
		return err
	}
	return c.flushPkt()
}
