package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/fsck"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/service/admission"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Push indexes and checks the pack, uploads it, and commits the ref updates
// with the pack entry in one transaction through the repo actor.
func (b *backend) Push(ctx context.Context, req gitproto.PushRequest) (gitproto.PushResult, error) {
	res := gitproto.PushResult{Results: make([]gitproto.CommandResult, len(req.Commands))}
	// Per command: the update as protection sees it (checkProtected
	// fills in what it walked).
	ups := make([]repo.RefUpdate, len(req.Commands))
	for i, c := range req.Commands {
		res.Results[i].Name = c.Name
		ups[i] = repo.RefUpdate{Name: c.Name, Old: c.Old, New: c.New}
	}
	var staged *repo.PackInfo
	if req.Pack != nil {
		// fsck runs on each commit, tree and tag as the indexer resolves
		// it, rather than reading every object back from the pack later.
		checker := fsck.NewChecker(b.e.Fsck)
		edges := walk.NewEdges()
		grown := &growth{adm: b.e.Admission}
		defer grown.release()
		// On S3 the pack is uploaded while it is indexed and checked, and
		// committed to the store only if the push stores it.
		up := repo.NewPackUpload(ctx, b.e.Deps, b.snap.Repo)
		defer up.Abort()
		var sealed func(*os.File, int64, object.ID)
		if up != nil {
			sealed = up.Start
		}
		ix, err := b.index(ctx, req.Pack, req.Progress, checker, edges, grown.reserve, sealed)
		if err != nil {
			switch {
			case errors.Is(err, fsck.ErrFsck):
				b.log().Warn("push rejected by fsck", zap.Error(err))
			case errors.Is(err, gitproto.ErrBusy):
				b.log().Warn("push refused by memory admission", zap.Error(err))
			case packcache.NoSpace(err):
				// The client is told which disk, not its path: nothing
				// was stored, and the push passes once space is freed.
				b.log().Warn("push refused: local disk full", zap.String("dir", b.e.IncomingDir), zap.Error(err))
				err = errIncomingDiskFull
			default:
				b.log().Warn("push rejected: bad pack", zap.Error(err))
			}
			res.UnpackErr = b.e.limitError(err)
			return res, nil
		}
		defer removeFiles(ix.PackPath, ix.IdxPath)
		// Everything the push can see: the new pack, then the repository.
		reader := b.snap.Objects()
		if len(ix.Objects) > 0 {
			newPack, err := pack.OpenIndexed(ix)
			if err != nil {
				return res, fmt.Errorf("open received pack: %w", err)
			}
			defer newPack.Close()
			reader = pack.NewSet(append([]*pack.Pack{newPack}, b.snap.Objects().Packs()...)...)
		}
		if err := checkGitmodules(checker, reader); err != nil {
			b.log().Warn("push rejected by fsck", zap.Error(err))
			res.UnpackErr = err
			return res, nil
		}
		logAccepted(b.log(), checker)
		b.checkConnected(ctx, reader, edges, req.Commands, res.Results)
		b.checkProtected(ctx, reader, ups, res.Results)
		failAtomic(req.Atomic, res.Results)
		if len(ix.Objects) > 0 && anyOK(res.Results) {
			var info repo.PackInfo
			if up != nil {
				info, err = up.Stage(ctx, ix)
			} else {
				info, err = repo.StagePack(ctx, b.e.Deps, b.snap.Repo, ix)
			}
			if objstore.Unavailable(err) {
				b.log().Warn("push refused: pack not stored", zap.Error(err))
				failStore(res.Results, storeNotStored)
				return res, nil
			}
			if err != nil {
				return res, fmt.Errorf("store pack: %w", err)
			}
			staged = &info
		}
	} else {
		for i, c := range req.Commands {
			if !c.New.IsZero() && !b.snap.Objects().Has(c.New) {
				res.Results[i].Err = "missing necessary objects"
			}
		}
		b.checkProtected(ctx, b.snap.Objects(), ups, res.Results)
	}
	return res, b.update(ctx, req, staged, res.Results, ups)
}

// checkConnected marks the commands whose new value does not resolve to a
// complete history. The common case reads nothing back: every reference
// the indexer saw in the pushed objects (edges) is present with its type.
// Else one walk over every new tip; only
// when it fails is each tip walked alone, so one bad ref does not fail the
// rest (a walk per tip up front would repeat the shared history per ref).
func (b *backend) checkConnected(ctx context.Context, r *pack.Set, edges *walk.Edges, cmds []gitproto.Command, results []gitproto.CommandResult) {
	known := b.snap.Objects().Has
	var tips []object.ID
	for _, c := range cmds {
		if !c.New.IsZero() {
			tips = append(tips, c.New)
		}
	}
	if len(tips) == 0 || edges.Closed(r, tips) || walk.CheckConnected(ctx, r, tips, known) == nil {
		return
	}
	for i, c := range cmds {
		if c.New.IsZero() {
			continue
		}
		if err := walk.CheckConnected(ctx, r, []object.ID{c.New}, known); err != nil {
			b.log().Warn("push command rejected: not connected", zap.String("ref", c.Name), zap.Error(err))
			results[i].Err = "missing necessary objects"
		}
	}
}

// checkProtected refuses, before anything is stored, the commands that the
// repository's protected ref patterns forbid (as the session's settings
// say; the writer checks again with its own when it commits). Whether an
// update is forced is decided as git does: the old value is not an
// ancestor of the new one, walked over r (the repository plus the pushed
// pack); a creation of a ref deleted under a no-force-push rule is an
// update from the value it was deleted at (Snapshot.DeletedTip). Only
// updates of protected refs are walked; ups records what was found.
// Every refusal is logged (audit).
func (b *backend) checkProtected(ctx context.Context, r object.Reader, ups []repo.RefUpdate, results []gitproto.CommandResult) {
	rules := b.sess.Info.Protections
	if len(rules) == 0 {
		return
	}
	var g *walk.Graph
	for i := range ups {
		u := &ups[i]
		if results[i].Err != "" || !slices.ContainsFunc(rules, func(p auth.Protection) bool { return p.Matches(u.Name) }) {
			continue
		}
		if u.Old.IsZero() && !u.New.IsZero() {
			u.Deleted = b.snap.DeletedTip(u.Name)
		}
		switch from := cmp.Or(u.Old, u.Deleted); {
		case from.IsZero() || u.New.IsZero():
		case from == u.New:
			u.FastForward = true // back where it was: nothing rewritten
		default:
			if g == nil {
				g = walk.NewGraph(r, b.e.MaxCommits)
			}
			var err error
			u.FastForward, err = walk.IsAncestor(ctx, g, from, u.New)
			if err != nil {
				// An old value the repository does not have cannot be
				// shown to be an ancestor: git too refuses it as forced.
				b.log().Info("push: ancestry undecidable, treated as forced", zap.String("ref", u.Name), zap.Error(err))
			}
		}
		if why := auth.CheckUpdate(rules, u.Name, u.Kind()); why != "" {
			results[i].Err = why
			b.log().Warn("audit: push refused by branch protection", zap.String("who", auth.IdentityFrom(ctx).Who()),
				zap.String("ref", u.Name), zap.Stringer("update", u.Kind()),
				zap.Stringer("old", cmp.Or(u.Old, u.Deleted)), zap.Stringer("new", u.New), zap.String("reason", why))
		}
	}
}

// failAtomic fails every command of an atomic push once one has failed,
// before the pack is stored: nothing of a refused atomic push is written.
func failAtomic(atomic bool, results []gitproto.CommandResult) {
	if !atomic || !slices.ContainsFunc(results, func(r gitproto.CommandResult) bool { return r.Err != "" }) {
		return
	}
	for i := range results {
		if results[i].Err == "" {
			results[i].Err = "atomic push failed"
		}
	}
}

// growth is what a push reserved beyond its admission estimate, for the
// objects its pack declares (pack.IndexOptions.Reserve).
type growth struct {
	adm      *admission.Controller
	releases []func()
}

// reserve asks admission for n more bytes; refused, the push is told the
// server is busy.
func (g *growth) reserve(n int64) error {
	release, ok := g.adm.Grow(admission.Push, n)
	if !ok {
		return fmt.Errorf("%w: the pushed objects need %d MiB more memory than the node has free now; retry later", gitproto.ErrBusy, (n+1<<20-1)>>20)
	}
	g.releases = append(g.releases, release)
	return nil
}

// release returns everything reserved, once the push is over.
func (g *growth) release() {
	for _, r := range g.releases {
		r()
	}
	g.releases = nil
}

// index streams the pack into IncomingDir and indexes it, passing every
// commit, tree and tag to c and, once c has accepted it, to edges; reserve
// is asked for the memory the pack's big objects need; sealed, if set, is
// handed the pack once its bytes are final (pack.IndexOptions.Sealed).
func (b *backend) index(ctx context.Context, r io.Reader, progress io.Writer, c *fsck.Checker, edges *walk.Edges, reserve func(int64) error, sealed func(*os.File, int64, object.ID)) (*pack.Indexed, error) {
	set := b.snap.Objects()
	return pack.IndexPack(ctx, r, b.e.IncomingDir, pack.IndexOptions{
		Base: set, BaseHas: set.Has,
		MaxObjectSize: b.e.MaxObjectSize, MaxPackSize: b.e.MaxPackSize, MaxDeltaDepth: b.e.MaxDeltaDepth,
		Reserve:  reserve,
		Sealed:   sealed,
		Progress: progressMeters(progress),
		Check: func(id object.ID, t object.Type, data []byte) error {
			if err := c.Check(id, t, data); err != nil {
				return err
			}
			edges.Add(t, data)
			return nil
		},
	})
}

// errIncomingDiskFull is the unpack error of a push whose pack the node's
// disk had no room for.
var errIncomingDiskFull = errors.New(gitserve.CacheDiskFull)

// limitError turns a pack refused for a configured limit into the
// *gitproto.LimitError the client sees in its unpack line; other errors
// are returned unchanged.
func (e *NodeResolver) limitError(err error) error {
	switch {
	case errors.Is(err, pack.ErrPackTooLarge):
		return &gitproto.LimitError{What: "pack too large", Limit: e.MaxPackSize, Unit: "bytes", Setting: gitproto.SettingMaxPackSize}
	case errors.Is(err, pack.ErrTooLarge):
		return &gitproto.LimitError{What: "object too large", Limit: e.MaxObjectSize, Unit: "bytes", Setting: gitproto.SettingMaxObjectSize,
			Hint: lfsHint(e.MaxObjectSize)}
	case errors.Is(err, pack.ErrDeltaDepth):
		return &gitproto.LimitError{What: "delta chain too deep", Limit: int64(cmp.Or(e.MaxDeltaDepth, pack.DefaultMaxDeltaDepth)), Setting: gitproto.SettingMaxDeltaDepth}
	}
	return err
}

// lfsHint is what a push refused for an object over limit bytes is told
// to do instead: this server speaks Git LFS, and git-lfs can rewrite the
// commits being pushed so that such files travel as LFS objects.
func lfsHint(limit int64) string {
	return fmt.Sprintf("store larger files with Git LFS, which this server supports: `git lfs migrate import --above=%d` moves them out of your commits, then push again", limit)
}

// checkGitmodules finishes fsck after indexing: every blob the pushed trees
// name .gitmodules is checked, read from the push or from the repository,
// because a blob pushed earlier as an ordinary file was never checked as
// one.
func checkGitmodules(c *fsck.Checker, all object.Reader) error {
	for _, id := range c.GitmodulesBlobs() {
		t, data, err := all.ReadObject(id)
		switch {
		case errors.Is(err, object.ErrNotFound):
			// Connectivity reports it too; fsck names the reason.
			if err := c.MissingGitmodules(id); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("read %s: %w", id, err)
		case t != object.Blob:
			// Check reports a .gitmodules that is not a blob.
			err = c.Check(id, t, data)
		default:
			err = c.CheckGitmodules(id, data)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// update commits the commands (ups, as checkProtected left them) that
// passed the checks.
func (b *backend) update(ctx context.Context, req gitproto.PushRequest, staged *repo.PackInfo, results []gitproto.CommandResult, ups []repo.RefUpdate) error {
	var cmds []repo.RefUpdate
	var idx []int
	for i, u := range ups {
		if results[i].Err != "" {
			continue
		}
		cmds = append(cmds, u)
		idx = append(idx, i)
	}
	if req.Atomic && len(idx) < len(req.Commands) {
		for i := range results {
			if results[i].Err == "" {
				results[i].Err = "atomic push failed"
			}
		}
		return nil
	}
	if len(cmds) == 0 {
		return nil
	}
	errs, err := b.sess.UpdateRefs(ctx, staged, cmds, req.Atomic)
	if objstore.Unavailable(err) {
		// Told to the client per ref: the cause, and whether the update
		// may still appear (a write the store may have taken is written
		// again, whole, before anything else; nothing acknowledged is lost).
		msg := storeNotChanged
		if errors.Is(err, refdb.ErrUncertain) {
			msg = storeUncertain
		}
		b.log().Warn("push not acknowledged: object store unavailable", zap.Error(err))
		for _, i := range idx {
			results[i].Err = msg
		}
		return nil
	}
	if err != nil {
		if errors.Is(err, refdb.ErrFenced) {
			b.log().Error("push not acknowledged: repository fenced by another writer", zap.Error(err))
		}
		for _, i := range idx {
			results[i].Err = "failed to update ref"
		}
		return fmt.Errorf("update refs: %w", err)
	}
	var tips []object.ID
	for k, e := range errs {
		if e != nil {
			results[idx[k]].Err = reason(e)
		} else if !cmds[k].New.IsZero() {
			tips = append(tips, cmds[k].New)
		}
	}
	if b.e.RefsWatch != nil && anyOK(results) {
		// The read API's cached refs answer is stale now. Best effort: its
		// 5 s TTL heals a failure, which is only logged.
		if err := b.e.RefsWatch.RefsChanged(ctx, b.snap.Repo); err != nil {
			b.log().Warn("push: cached refs answer not dropped (expires within seconds)", zap.Error(err))
		}
	}
	if b.e.Bitmaps != nil && staged != nil && len(b.snap.Packs) == 0 && len(tips) > 0 {
		// The first pack of an empty repository is the whole repository:
		// give it a bitmap so clones need not walk before the first repack.
		// In the background: the push is acknowledged without waiting.
		b.e.Bitmaps.Start(b.e.Deps, b.snap.Repo, staged.Name, tips, nil)
	}
	if staged != nil && len(tips) > 0 {
		// One more pack listed: the node rolls up small packs in the
		// background so their number stays logarithmic.
		b.e.Node.Maintain(b.snap.Repo)
	}
	return nil
}

// reason maps a per-command error to git's wording.
func reason(err error) string {
	var pe *repo.ProtectedError
	switch {
	case errors.As(err, &pe):
		return pe.Reason
	case errors.Is(err, repo.ErrStale):
		return "fetch first"
	case errors.Is(err, repo.ErrAtomicFailed):
		return "atomic push failed"
	case errors.Is(err, repo.ErrInvalidUpdate):
		return "funny refname"
	}
	return "failed to update ref"
}

func anyOK(rs []gitproto.CommandResult) bool {
	for _, r := range rs {
		if r.Err == "" {
			return true
		}
	}
	return false
}

func removeFiles(paths ...string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// logAccepted names the objects whose cosmetic fsck findings the push was
// allowed to keep (a sample: a pack may hold millions).
func logAccepted(log *zap.Logger, c *fsck.Checker) {
	sample, total := c.Accepted()
	for _, f := range sample {
		log.Info("push accepted an object with a cosmetic fsck finding (RGIT_FSCK_STRICT=1 rejects it)",
			zap.Stringer("object", f.ID), zap.String("check", f.Check), zap.String("detail", f.Detail))
	}
	if total > len(sample) {
		log.Info("more cosmetic fsck findings accepted in this push", zap.Int("not_logged", total-len(sample)))
	}
}

// The ng reasons of a push the object store failed: each names the store
// as the cause and says what became of the update.
const (
	storeNotStored  = "object store unavailable: pack not stored, nothing changed; try again later"
	storeNotChanged = "object store unavailable: nothing changed; try again later"
	storeUncertain  = "object store unavailable: update not confirmed (it applies if the store took it); try again later"
)

// failStore marks every command not already refused with reason.
func failStore(results []gitproto.CommandResult, reason string) {
	for i := range results {
		if results[i].Err == "" {
			results[i].Err = reason
		}
	}
}
