package gitproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/wire/pktline"
)

const upErrPrefix = "upload-pack: "

// UploadPack serves one upload-pack session (fetch, clone, ls-remote) on
// in/out. Request errors are reported to the client and returned wrapping
// ErrProtocol.
func UploadPack(ctx context.Context, b Backend, in io.Reader, out io.Writer, opt Options) (err error) {
	c := newPooledConn(in, out)
	c.bound(opt)
	defer func() {
		if ferr := c.flush(); err == nil {
			err = ferr
		}
		c.release()
	}()
	if opt.Protocol == 2 {
		return uploadPackV2(ctx, b, c, opt)
	}
	return uploadPackV0(ctx, b, c, opt)
}

// fetchArgs is what both protocol versions parse out of a fetch request.
type fetchArgs struct {
	req        FetchRequest
	wantRefs   []Ref // v2 want-ref, in request order
	done       bool
	noProgress bool
	waitDone   bool
	deepenNot  []string
}

// idList is a request's distinct ids in first-seen order. git treats a
// repeated want or have like the first; keeping repeats would let a
// request's length, not its content, decide the server's memory and the
// length of its answer.
type idList struct {
	ids  []object.ID
	seen map[object.ID]struct{}
}

func (l *idList) has(id object.ID) bool {
	_, ok := l.seen[id]
	return ok
}

// add appends id unless the list has it; it reports whether it did.
func (l *idList) add(id object.ID) bool {
	if l.has(id) {
		return false
	}
	if l.seen == nil {
		l.seen = make(map[object.ID]struct{})
	}
	l.seen[id] = struct{}{}
	l.ids = append(l.ids, id)
	return true
}

func tooManyWants(limit int) *LimitError {
	return &LimitError{What: "too many want lines", Limit: int64(limit), Setting: SettingMaxWants}
}

func tooManyHaves(limit int) *LimitError {
	return &LimitError{What: "too many have lines", Limit: int64(limit), Setting: SettingMaxHaves}
}

// charge counts n more argument bytes; over the limit it returns the
// error to report.
func (b *argBudget) charge(n int) *LimitError {
	if b.used += n; b.used > b.limit {
		return &LimitError{What: "request too large", Limit: int64(b.limit), Unit: "bytes", Setting: SettingMaxArgBytes}
	}
	return nil
}

// parseShallowArg handles the shallow/deepen/filter arguments shared by v0
// and v2. It returns handled=false for other lines.
func (a *fetchArgs) parseShallowArg(l string) (handled bool, err error) {
	switch {
	case strings.HasPrefix(l, "shallow "):
		id, ok := object.ParseHex(l[len("shallow "):])
		if !ok {
			return true, fmt.Errorf("invalid shallow line: %s", l)
		}
		a.req.ClientShallow = append(a.req.ClientShallow, id)
	case strings.HasPrefix(l, "deepen "):
		n, err := strconv.Atoi(l[len("deepen "):])
		if err != nil || n <= 0 {
			return true, fmt.Errorf("invalid deepen: %s", l)
		}
		a.req.Depth = n
	case strings.HasPrefix(l, "deepen-since "):
		t, err := strconv.ParseInt(l[len("deepen-since "):], 10, 64)
		if err != nil || t <= 0 {
			return true, fmt.Errorf("invalid deepen-since: %s", l)
		}
		a.req.DeepenSince = t
	case strings.HasPrefix(l, "deepen-not "):
		a.deepenNot = append(a.deepenNot, l[len("deepen-not "):])
	case l == "deepen-relative":
		a.req.DeepenRelative = true
	case strings.HasPrefix(l, "filter "):
		spec := l[len("filter "):]
		if !validFilter(spec) {
			return true, fmt.Errorf("invalid filter-spec '%s'", spec)
		}
		a.req.Filter = spec
	default:
		return false, nil
	}
	return true, nil
}

// validFilter accepts the filter-specs rgit serves (DESIGN.md §5).
func validFilter(spec string) bool {
	switch {
	case spec == "blob:none":
		return true
	case strings.HasPrefix(spec, "blob:limit="):
		v := strings.TrimRight(spec[len("blob:limit="):], "kKmMgG")
		_, err := strconv.ParseUint(v, 10, 64)
		return err == nil && len(spec)-len("blob:limit=")-len(v) <= 1
	case strings.HasPrefix(spec, "tree:"):
		_, err := strconv.ParseUint(spec[len("tree:"):], 10, 32)
		return err == nil
	}
	return false
}

// finish validates the combination of arguments and resolves deepen-not
// names against the snapshot.
func (a *fetchArgs) finish(ix *refIndex) error {
	if a.req.Depth > 0 && (a.req.DeepenSince != 0 || len(a.deepenNot) > 0) {
		return errors.New("deepen and deepen-since (or deepen-not) cannot be used together")
	}
	for _, name := range a.deepenNot {
		r, ok := ix.dwim(name)
		if !ok {
			return fmt.Errorf("git upload-pack: ambiguous deepen-not: %s", name)
		}
		id := r.ID
		if !r.Peeled.IsZero() {
			id = r.Peeled // rev-list ^<tag> excludes the tagged commit
		}
		a.req.DeepenNot = append(a.req.DeepenNot, id)
	}
	return nil
}

// checkWants verifies that every want may be served. It returns a message
// for the client and an error: ErrProtocol-wrapped for bad wants, plain for
// backend failures.
func checkWants(ctx context.Context, b Backend, ix *refIndex, wants []object.ID) (string, error) {
	var rest []object.ID
	for _, w := range wants {
		if ix.tips[w] {
			continue
		}
		if !b.HasCommit(ctx, w) {
			return notOurRef(w)
		}
		rest = append(rest, w)
	}
	if len(rest) == 0 {
		return "", nil
	}
	err := b.CheckWants(ctx, ix.snap, rest)
	if err == nil {
		return "", nil
	}
	if !errors.Is(err, ErrNotOurRef) {
		return "internal server error", fmt.Errorf("check wants: %w", err)
	}
	bad := rest[0]
	var nr *NotOurRefError
	if errors.As(err, &nr) {
		bad = nr.ID
	}
	return notOurRef(bad)
}

func notOurRef(id object.ID) (string, error) {
	msg := "not our ref " + id.String()
	return msg, fmt.Errorf("%w: %s", ErrProtocol, msg)
}

// commonHaves returns the haves the backend has, in request order.
func commonHaves(ctx context.Context, b Backend, haves []object.ID) []object.ID {
	var common []object.ID
	for _, h := range haves {
		if b.HasCommit(ctx, h) {
			common = append(common, h)
		}
	}
	return common
}

// writePack streams the planned pack to w, with progress on the muxer's
// band 2 unless disabled.
func writePack(ctx context.Context, c *conn, plan FetchPlan, w io.Writer, progress io.Writer) error {
	if err := plan.WritePack(ctx, w, progress); err != nil {
		if errors.Is(err, pktline.ErrClosed) {
			return fmt.Errorf("write pack: %w", err)
		}
		return c.internalErr(upErrPrefix, fmt.Errorf("write pack: %w", err))
	}
	return nil
}
