package gitproto

import (
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// refIndex answers name and tip lookups on a snapshot.
type refIndex struct {
	snap   RefSnapshot
	byName map[string]Ref
	tips   map[object.ID]bool // ref ids and peeled ids
}

func newRefIndex(snap RefSnapshot) *refIndex {
	ix := &refIndex{snap: snap, byName: make(map[string]Ref, len(snap.Refs)), tips: make(map[object.ID]bool, len(snap.Refs))}
	for _, r := range snap.Refs {
		ix.byName[r.Name] = r
		ix.tips[r.ID] = true
		if !r.Peeled.IsZero() {
			ix.tips[r.Peeled] = true
		}
	}
	return ix
}

// head returns HEAD's target ref when HEAD is born.
func (ix *refIndex) head() (Ref, bool) {
	if ix.snap.Head == "" {
		return Ref{}, false
	}
	r, ok := ix.byName[ix.snap.Head]
	return r, ok
}

// dwim resolves a short ref name the way git's expand_ref does for
// deepen-not arguments.
func (ix *refIndex) dwim(name string) (Ref, bool) {
	if name == "HEAD" {
		return ix.head()
	}
	for _, pat := range []string{"%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"} {
		if r, ok := ix.byName[strings.Replace(pat, "%s", name, 1)]; ok {
			return r, true
		}
	}
	return Ref{}, false
}
