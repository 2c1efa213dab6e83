package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// FloorKey is the refdb key of the map's epoch floor (decimal). It lies
// outside KeyPrefix, so scans of entries never see it.
const FloorKey = "meta/epoch-floor"

// EncodeFloor and DecodeFloor convert the floor to and from its stored
// form.
func EncodeFloor(f uint64) []byte { return strconv.AppendUint(nil, f, 10) }

// DecodeFloor parses what EncodeFloor wrote; anything else is
// ErrCorruptEntry.
func DecodeFloor(b []byte) (uint64, error) {
	f, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decode epoch floor %q: %w", b, ErrCorruptEntry)
	}
	return f, nil
}

// Pruned is what Prune removed.
type Pruned struct {
	// Repos whose entries were removed, sorted.
	Repos []names.Repo
	// Floor is the map's epoch floor after the prune: at least the highest
	// epoch removed.
	Floor uint64
	// Write: the removals and the floor must be persisted in one
	// transaction (remove Key(r) for each of Repos, set FloorKey) before
	// anyone acts on the pruned map. Persisting the removals without the
	// floor would let a returning repo be granted an epoch it had before.
	Write bool
}

// Prune removes the entries that lapsed at least Timings.PruneGrace ago
// (none by age when it is zero) and the lapsed entries of the repos in
// gone (deleted repositories, which need no grace: nobody claims a repo
// that does not exist). Live entries are never pruned, whatever gone says:
// their owner still serves.
//
//	entry                      in gone   pruned
//	live                       any       no
//	lapsed < grace ago         no        no
//	lapsed < grace ago         yes       yes
//	lapsed ≥ grace ago         any       yes
//
// The floor rises to the highest removed epoch, and grants start above the
// floor, so a repo that comes back is granted an epoch above every epoch
// it held before: a node still holding an old lease sees a higher epoch
// (and another owner) and stops, exactly as if the entry had stayed.
func (m *Map) Prune(now time.Time, gone []names.Repo) Pruned {
	p := Pruned{Floor: m.floor}
	m.each(func(repo names.Repo, e Entry) bool {
		if e = m.bind(e); e.Live(now) {
			return true
		}
		aged := m.t.PruneGrace > 0 && now.Sub(e.Expires) >= m.t.PruneGrace
		if !aged && !slices.Contains(gone, repo) {
			return true
		}
		p.Repos = append(p.Repos, repo)
		p.Floor = max(p.Floor, e.Epoch)
		return true
	})
	if len(p.Repos) == 0 {
		return p
	}
	slices.SortFunc(p.Repos, names.Compare)
	for _, r := range p.Repos {
		delete(m.entries, r)
		m.removed[r] = struct{}{}
	}
	m.floor = p.Floor
	p.Write = true
	return p
}

// Lapsed lists the repos whose entries lapsed in [since, now), sorted:
// the candidates the leader checks for deletion before a Prune. Asking
// only about recent lapses bounds the checks by the rate at which leases
// end, not by the size of the map; a deleted repo missed here still goes
// at the end of the grace period.
func (m *Map) Lapsed(since, now time.Time) []names.Repo {
	var out []names.Repo
	m.each(func(repo names.Repo, e Entry) bool {
		if e = m.bind(e); !e.Expires.Before(since) && !e.Live(now) {
			out = append(out, repo)
		}
		return true
	})
	slices.SortFunc(out, names.Compare)
	return out
}
