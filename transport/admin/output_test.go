package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

type mapView map[names.Repo]cluster.Entry

func (m mapView) Get(r names.Repo) (cluster.Entry, bool) { e, ok := m[r]; return e, ok }

// TestWhereShape pins where's JSON shape, which scripts depend on, and
// its text, which says whose view of the map it is and how old.
func TestWhereShape(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	view := mapView{
		names.MustParse("a/live"): {Node: "rgit-1", Expires: now.Add(time.Second), Epoch: 7},
		names.MustParse("a/old"):  {Node: "rgit-2", Expires: now, Epoch: 3},
	}
	cases := map[string]string{
		"a/live": `{"repo":"a/live","state":"live","node":"rgit-1","epoch":7,"expires":"2026-01-02T03:04:06Z","view":"rgit-2","view_age_ms":140}`,
		"a/old":  `{"repo":"a/old","state":"expired","node":"rgit-2","epoch":3,"expires":"2026-01-02T03:04:05Z","view":"rgit-2","view_age_ms":140}`,
		"a/none": `{"repo":"a/none","state":"unowned","view":"rgit-2","view_age_ms":140}`,
	}
	for r, want := range cases {
		b, err := json.Marshal(whereIn(view, "rgit-2", 140, names.MustParse(r), now))
		if err != nil || string(b) != want {
			t.Errorf("where %s = %s, %v; want %s", r, b, err, want)
		}
	}
	if got := whereIn(view, "rgit-2", 140, names.MustParse("a/live"), now).Text(); got != "a/live is owned by rgit-1 (epoch 7, lease live, expires 2026-01-02T03:04:06Z)\n"+
		"according to rgit-2's view of the ownership map, 140 ms old" {
		t.Errorf("text = %q", got)
	}
}
