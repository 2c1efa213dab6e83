package gitproto

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// receiveCapabilities is the receive-pack capability list before agent.
var receiveCapabilities = []string{
	"report-status", "report-status-v2", "delete-refs", "side-band-64k",
	"quiet", "atomic", "ofs-delta", "push-options", "object-format=sha1",
}

const rpErrPrefix = "receive-pack: "

// ReceivePack serves one receive-pack session (push) on in/out. Protocol
// v2 does not exist for push; Protocol 2 is served as v0, as git does.
func ReceivePack(ctx context.Context, b Backend, in io.Reader, out io.Writer, opt Options) (err error) {
	c := newConn(in, out)
	defer func() {
		if ferr := c.flush(); err == nil {
			err = ferr
		}
	}()
	if !opt.StatelessRPC || opt.AdvertiseOnly {
		snap, err := b.Snapshot(ctx)
		if err != nil {
			return c.internalErr(rpErrPrefix, fmt.Errorf("snapshot: %w", err))
		}
		caps := strings.Join(receiveCapabilities, " ") + " agent=" + opt.agent()
		version := opt.Protocol
		if version == 2 {
			version = 0
		}
		if err := advertiseRefsV0(c, version, snap.Refs, caps, false); err != nil {
			return err
		}
		if opt.AdvertiseOnly {
			return nil
		}
	}
	p, err := readPushRequest(c, opt)
	if err != nil || p == nil {
		return err
	}
	return p.execute(ctx, b, c)
}

// push is a parsed push request.
type push struct {
	cmds         []Command
	reasons      []string // per command: "" or a rejection decided before the backend
	reportStatus bool
	sideband     bool
	quiet        bool
	atomic       bool
	options      []string
}

// readPushRequest reads the command list and push options. It returns nil
// when the client sent no commands.
func readPushRequest(c *conn, opt Options) (*push, error) {
	p := &push{}
	maxCmds := opt.maxPushRefs()
	pushOptions := false
	for {
		l, err := c.read()
		if err == io.EOF && len(p.cmds) == 0 {
			return nil, nil
		}
		if err == io.EOF {
			err = fmt.Errorf("%w: unexpected end of command list", ErrProtocol)
		}
		if err != nil {
			return nil, c.failRead(err)
		}
		if l.kind == pktline.Flush {
			break
		}
		if l.kind != pktline.Data {
			return nil, c.protoErr("", "protocol error: unexpected %s", l.kind)
		}
		text := l.text
		if len(p.cmds) == 0 {
			cmdText, caps, ok := strings.Cut(text, "\x00")
			if !ok {
				return nil, c.protoErr("", "protocol error: expected capabilities after first command, got '%s'", cmdText)
			}
			text = cmdText
			pushOptions = p.parseCaps(caps)
		} else if strings.Contains(text, "\x00") {
			return nil, c.protoErr("", "protocol error: unexpected NUL in command '%s'", strings.ReplaceAll(text, "\x00", "\\0"))
		}
		if strings.HasPrefix(text, "shallow ") {
			// A shallow client announces its boundary; connectivity is
			// checked by the backend against what it stores, so the list
			// carries no information we need.
			continue
		}
		cmd, ok := parseCommand(text)
		if !ok {
			return nil, c.protoErr("", "protocol error: expected old/new/ref, got '%s'", text)
		}
		if len(p.cmds) >= maxCmds {
			p.failBand(c)
			return nil, c.failLimit(rpErrPrefix, &LimitError{What: "too many ref updates in one push", Limit: int64(maxCmds), Setting: SettingMaxPushRefs})
		}
		p.cmds = append(p.cmds, cmd)
	}
	if len(p.cmds) == 0 {
		return nil, nil
	}
	if pushOptions {
		maxOpts := opt.maxPushOptions()
		for {
			l, err := c.readData()
			if err != nil {
				return nil, c.failRead(err)
			}
			if l.kind == pktline.Flush {
				break
			}
			if l.kind != pktline.Data {
				return nil, c.protoErr("", "protocol error: unexpected %s in push options", l.kind)
			}
			if len(p.options) >= maxOpts {
				p.failBand(c)
				return nil, c.failLimit(rpErrPrefix, &LimitError{What: "too many push options", Limit: int64(maxOpts), Setting: SettingMaxPushOptions})
			}
			if len(l.text) > MaxPushOptionLen {
				p.failBand(c)
				return nil, c.failLimit(rpErrPrefix, &LimitError{What: "push option too long", Limit: MaxPushOptionLen, Unit: "bytes"})
			}
			p.options = append(p.options, l.text)
		}
	}
	p.reasons = commandReasons(p.cmds)
	return p, nil
}

// failBand makes a failure while reading the request go to the client on
// side-band 3 when it asked for side-band: git then reads the response
// through its demultiplexer, which prints "remote error: <msg>" for band
// 3 but only "bad band" for an ERR packet.
func (p *push) failBand(c *conn) {
	if p.sideband {
		c.sideband(pktline.SideBand64k)
	}
}

// reasonDuplicate rejects every command naming a ref that another command
// of the same push names too: which one the client meant is unknowable.
const reasonDuplicate = "ref updated more than once in this push"

// commandReasons decides the rejections that need no repository: per
// command "" or git's reason text.
func commandReasons(cmds []Command) []string {
	seen := make(map[string]int, len(cmds))
	for _, c := range cmds {
		seen[c.Name]++
	}
	reasons := make([]string, len(cmds))
	for i, c := range cmds {
		if reasons[i] = checkRefName(c.Name); reasons[i] == "" && seen[c.Name] > 1 {
			reasons[i] = reasonDuplicate
		}
	}
	return reasons
}

// parseCaps records the client's capabilities and reports whether push
// options follow the command list.
func (p *push) parseCaps(caps string) (pushOptions bool) {
	for _, cp := range strings.Fields(caps) {
		switch cp {
		case "report-status", "report-status-v2":
			p.reportStatus = true
		case "side-band-64k":
			p.sideband = true
		case "quiet":
			p.quiet = true
		case "atomic":
			p.atomic = true
		case "push-options":
			pushOptions = true
		}
	}
	return pushOptions
}

// parseCommand parses "<old> <new> <ref>".
func parseCommand(s string) (Command, bool) {
	if len(s) < 83 || s[40] != ' ' || s[81] != ' ' {
		return Command{}, false
	}
	old, ok1 := object.ParseHex(s[:40])
	nu, ok2 := object.ParseHex(s[41:81])
	if !ok1 || !ok2 {
		return Command{}, false
	}
	return Command{Name: s[82:], Old: old, New: nu}, true
}

// needsPack reports whether any command creates or updates a ref, in which
// case the client sends a pack (possibly empty) after the commands.
func (p *push) needsPack() bool {
	for _, c := range p.cmds {
		if !c.New.IsZero() {
			return true
		}
	}
	return false
}

func (p *push) execute(ctx context.Context, b Backend, c *conn) error {
	var mux *pktline.Muxer
	var progress io.Writer
	if p.sideband {
		mux = pktline.NewMuxer(c.pw, pktline.SideBand64k)
		if !p.quiet {
			progress = mux.Progress()
		}
	}
	var pack io.Reader
	if p.needsPack() {
		pack = c.in
	}
	results, unpackErr, err := p.apply(ctx, b, pack, progress)
	if err != nil {
		if mux != nil {
			c.mux = mux
		}
		return c.internalErr(rpErrPrefix, err)
	}
	if !p.reportStatus {
		if mux != nil {
			return c.flushPkt()
		}
		return nil
	}
	var report strings.Builder
	rw := pktline.NewWriter(&report)
	if unpackErr != nil {
		_ = rw.WriteString("unpack " + oneLine(unpackErr.Error()) + "\n")
	} else {
		_ = rw.WriteString("unpack ok\n")
	}
	for i, cmd := range p.cmds {
		if results[i] == "" {
			_ = rw.WriteString("ok " + cmd.Name + "\n")
		} else {
			_ = rw.WriteString("ng " + cmd.Name + " " + oneLine(results[i]) + "\n")
		}
	}
	_ = rw.Flush()
	if mux == nil {
		if _, err := c.out.WriteString(report.String()); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	}
	if _, err := mux.WriteBand(pktline.BandData, []byte(report.String())); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return c.flushPkt()
}

// apply hands the acceptable commands to the backend and merges its
// results with the rejections decided here. err is an internal failure.
func (p *push) apply(ctx context.Context, b Backend, pack io.Reader, progress io.Writer) (results []string, unpackErr error, err error) {
	results = make([]string, len(p.cmds))
	var sub []Command
	var idx []int
	rejected := false
	for i, cmd := range p.cmds {
		if p.reasons[i] != "" {
			results[i] = p.reasons[i]
			rejected = true
			continue
		}
		sub = append(sub, cmd)
		idx = append(idx, i)
	}
	if rejected && p.atomic {
		for _, i := range idx {
			results[i] = "atomic push failed"
		}
		sub, idx = nil, nil
	}
	if len(sub) == 0 {
		// Nothing to apply, but the client still sends its pack; read it
		// so it is not blocked writing while we answer.
		if pack != nil {
			if _, err := io.Copy(io.Discard, pack); err != nil {
				return nil, nil, fmt.Errorf("discard pack: %w", err)
			}
		}
		return results, nil, nil
	}
	res, err := b.Push(ctx, PushRequest{Commands: sub, Atomic: p.atomic, Options: p.options, Pack: pack, Progress: progress})
	if err != nil {
		return nil, nil, fmt.Errorf("push: %w", err)
	}
	for j, i := range idx {
		switch {
		case res.UnpackErr != nil:
			results[i] = "unpacker error"
			if j < len(res.Results) && res.Results[j].Err != "" {
				results[i] = res.Results[j].Err
			}
		case j < len(res.Results):
			results[i] = res.Results[j].Err
		default:
			results[i] = "failed to update ref"
		}
	}
	return results, res.UnpackErr, nil
}

// oneLine keeps a reason on one report line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "\x00", " ").Replace(s)
}
