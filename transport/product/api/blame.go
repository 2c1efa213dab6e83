package api

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// errNotText wraps the refusal to blame a binary file (HTTP 422).
var errNotText = errors.New("not a text file")

// blameAnswer is blame's JSON: who last changed each line of the file at
// a commit, as `git blame --first-parent` says.
type blameAnswer struct {
	Commit string `json:"commit"`
	Path   string `json:"path"`
	Lines  int    `json:"lines"`
	// Runs cover the lines in order: each is consecutive lines last
	// changed by one commit.
	Runs []blameRun `json:"runs"`
	// Commits holds every commit Runs names.
	Commits map[string]blameCommit `json:"commits"`
	cutShort
	// origins is each line's commit and its line there (0-based).
	origins []lineOrigin
}

type blameRun struct {
	Commit string `json:"commit"`
	Start  int    `json:"start"` // the first line, from 1
	Count  int    `json:"count"`
}

type blameCommit struct {
	// Path is the file's path in that commit (another one before a
	// rename).
	Path    string `json:"path"`
	Author  person `json:"author"`
	Summary string `json:"summary"`
}

type lineOrigin struct {
	commit object.ID
	line   int
}

// pendingLine is a line of the blamed file whose commit is not known
// yet: its line in the version being looked at.
type pendingLine struct{ final, line int }

// blameStep is the file in one commit of the walk.
type blameStep struct {
	commit object.ID
	sub    []string
	blob   object.ID
}

// blameWalk is one blame's walk down first-parent history.
type blameWalk struct {
	rd reader
	// path reads the commits' facts at the file's path (pathWalk): a
	// commit costs a look at its root tree, and nothing when a blame of
	// the path saw it before. After a rename it is the older path's.
	path *pathWalk
}

// blame attributes each line of the file at sub in commit id to the
// commit that last changed it, walking first-parent history as `git
// blame --first-parent` does: each commit whose version of the file
// differs from its parent's keeps the lines its change touched (by
// matchLines, git's own line pairing) and passes the others on; a file
// absent from the parent is followed through a rename, else its lines
// stay with the commit that added it. Past MaxBlameCommits examined
// commits or BlameTimeout, or at an older version over
// MaxBlameFileBytes, the walk stops and the lines left are the oldest
// commit's reached, the answer saying so. The file itself must be text
// within MaxBlameFileBytes (else 422).
func (rd reader) blame(id object.ID, sub []string) (blameAnswer, error) {
	lim := rd.w.lim
	deadline := time.Now().Add(lim.BlameTimeout)
	w := &blameWalk{rd: rd, path: rd.pathWalk(sub)}
	defer func() { w.path.done() }()
	cur, content, err := w.target(id)
	if err != nil {
		return blameAnswer{}, err
	}
	out := blameAnswer{Commit: cur.commit.String(), Path: strings.Join(sub, "/"), Runs: []blameRun{}, Commits: map[string]blameCommit{}}
	n := len(splitLines(content))
	out.Lines, out.origins = n, make([]lineOrigin, n)
	pending := make([]pendingLine, n)
	for i := range pending {
		pending[i] = pendingLine{i, i}
	}
	paths := map[object.ID]string{}
	settle := func(at blameStep, lines []pendingLine) {
		for _, p := range lines {
			out.origins[p.final] = lineOrigin{at.commit, p.line}
		}
		if len(lines) > 0 {
			paths[at.commit] = strings.Join(at.sub, "/")
		}
	}
	for examined := 0; len(pending) > 0; examined++ {
		if err := rd.w.ctx.Err(); err != nil {
			return out, err
		}
		if examined == lim.MaxBlameCommits {
			out.truncate(limitErr("blame examined too many commits", int64(lim.MaxBlameCommits), "", SettingMaxBlameCommits))
			break
		}
		if !time.Now().Before(deadline) {
			out.truncate(limitErr("blame took too long", lim.BlameTimeout.Milliseconds(), "ms", SettingBlameTimeout))
			out.timedOut = true
			break
		}
		parent, found, err := w.parent(cur)
		if le, ok := asLimit(err); ok {
			out.truncate(le) // looking for a rename met a diff limit
			break
		}
		if err != nil {
			return out, err
		}
		if !found {
			break // a root commit, or the file began here
		}
		if parent.blob != cur.blob {
			older, err := rd.blameContent(parent.blob, parent.sub, false)
			if le, ok := asLimit(err); ok {
				out.truncate(le)
				break
			}
			if err != nil {
				return out, err
			}
			match := matchLines(older, content)
			kept := pending[:0]
			for _, p := range pending {
				if m := match[p.line]; m >= 0 {
					kept = append(kept, pendingLine{p.final, m})
				} else {
					settle(cur, []pendingLine{p})
				}
			}
			pending, content = kept, older
		}
		cur = parent
	}
	settle(cur, pending)
	return out, rd.blameRuns(&out, paths)
}

// blameTarget is what blame's target answers, for a HEAD request.
func (rd reader) blameTarget(id object.ID, sub []string) error {
	w := &blameWalk{rd: rd, path: rd.pathWalk(sub)}
	defer w.path.done()
	_, _, err := w.target(id)
	return err
}

// target reads the commit id (a tag is peeled) and its file at the
// walk's path, refusing what blame cannot answer: no such file, a
// directory or submodule (404), a binary file or one over
// MaxBlameFileBytes (422).
func (w *blameWalk) target(id object.ID) (blameStep, []byte, error) {
	cid, _, err := w.rd.peelTo(id, object.Commit)
	if err != nil {
		return blameStep{}, nil, err
	}
	f, err := w.path.commit(cid)
	if err != nil {
		return blameStep{}, nil, err
	}
	st := blameStep{commit: cid, sub: w.path.sub, blob: blobAt(f.at)}
	if st.blob.IsZero() {
		return st, nil, notFound("no file %s in %s", strings.Join(st.sub, "/"), cid)
	}
	content, err := w.rd.blameContent(st.blob, st.sub, true)
	return st, content, err
}

// blobAt is the blob of a path's entry; zero for none, a directory or a
// submodule.
func blobAt(e pathEntry) object.ID {
	switch e.mode & 0o170000 {
	case object.ModeTree, object.ModeGitlink:
		return object.ID{}
	}
	return e.id
}

// blameContent reads a version of the file within MaxBlameFileBytes;
// the blamed version (asked) must also be text.
func (rd reader) blameContent(id object.ID, sub []string, asked bool) ([]byte, error) {
	_, size, err := rd.objs.ReadHeader(id)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", id, err)
	}
	if max := rd.w.lim.MaxBlameFileBytes; size > max {
		what := "file too large to blame"
		if !asked {
			what = "an older version of the file is too large to blame"
		}
		return nil, limitErr(what, max, "bytes", SettingMaxBlameFileBytes)
	}
	_, data, err := rd.read(id)
	if err != nil {
		return nil, err
	}
	if asked && bytes.IndexByte(data[:min(len(data), binarySniffGit)], 0) >= 0 {
		return nil, fmt.Errorf("%w: %s is binary", errNotText, strings.Join(sub, "/"))
	}
	return data, nil
}

// parent is the file in cur's first parent: at the same path, else
// where a rename in cur moved it from (the walk then follows that path).
// found is false when there is no parent (a root, or a shallow boundary)
// or the file is new in cur.
func (w *blameWalk) parent(cur blameStep) (blameStep, bool, error) {
	f, err := w.path.commit(cur.commit)
	if err != nil || len(f.parents) == 0 {
		return blameStep{}, false, err
	}
	pid := f.parents[0]
	pf, err := w.path.commit(pid)
	if errors.Is(err, ErrNotFound) {
		return blameStep{}, false, nil
	}
	if err != nil {
		return blameStep{}, false, fmt.Errorf("parent of %s: %w", cur.commit, err)
	}
	p := blameStep{commit: pid, sub: cur.sub, blob: blobAt(pf.at)}
	if !p.blob.IsZero() {
		return p, true, nil
	}
	from, err := w.rd.renamedFrom(pid, cur.commit, strings.Join(cur.sub, "/"))
	if err != nil || from == "" {
		return p, false, err
	}
	w.path.done()
	w.path = w.rd.pathWalk(strings.Split(from, "/"))
	if pf, err = w.path.commit(pid); err != nil {
		return p, false, err
	}
	p.sub, p.blob = w.path.sub, blobAt(pf.at)
	return p, !p.blob.IsZero(), nil
}

// renamedFrom is the path in commit from that a rename between from and
// to (its child) moved path from ("" for none), found as a diff finds
// renames but for path alone, as git blame looks (every deleted file a
// candidate source, no other added file competing for one).
func (rd reader) renamedFrom(fromCommit, toCommit object.ID, path string) (string, error) {
	from, _, err := rd.peelTo(fromCommit, object.Tree)
	if err != nil {
		return "", err
	}
	to, _, err := rd.peelTo(toCommit, object.Tree)
	if err != nil {
		return "", err
	}
	walk := rd.newDiffWalk()
	walk.onlyAdded = path
	if err := walk.trees(from, to, ""); err != nil {
		return "", fmt.Errorf("renames %s..%s: %w", from, to, err)
	}
	changes, err := rd.detectRenames(walk.out)
	if err != nil {
		return "", fmt.Errorf("renames %s..%s: %w", from, to, err)
	}
	for _, c := range changes {
		if c.To.Name == path && c.From.Name != "" && c.From.Name != path {
			return c.From.Name, nil
		}
	}
	return "", nil
}

// blameRuns groups the lines' origins into runs and describes each
// commit they name.
func (rd reader) blameRuns(out *blameAnswer, paths map[object.ID]string) error {
	for i, o := range out.origins {
		if k := len(out.Runs) - 1; k >= 0 && out.Runs[k].Commit == o.commit.String() {
			out.Runs[k].Count++
			continue
		}
		out.Runs = append(out.Runs, blameRun{Commit: o.commit.String(), Start: i + 1, Count: 1})
	}
	for id, path := range paths {
		c, _, err := rd.commit(id)
		if err != nil {
			return err
		}
		summary, _, _ := strings.Cut(c.Message, "\n")
		out.Commits[c.OID] = blameCommit{Path: path, Author: c.Author, Summary: summary}
	}
	return nil
}
