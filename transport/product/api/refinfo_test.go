package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestAheadBehindMatchesGit: the counts are git rev-list --left-right
// --count main...branch for a branch ahead, one behind, one both (with a
// merge from main), one forked from that and merged with ahead, an
// unrelated history and main itself, with dates that grow and with one
// date for all: asked one head at a time and all in one walk. A small
// budget stops the walk and says which heads it left unsettled: those
// it settled have git's counts.
func TestAheadBehindMatchesGit(t *testing.T) {
	for _, growing := range []bool{true, false} {
		t.Run(fmt.Sprint("growing dates ", growing), func(t *testing.T) { aheadBehindMatchesGit(t, growing) })
	}
}

func aheadBehindMatchesGit(t *testing.T, growing bool) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	n := 0
	tick := func() {
		n++
		if growing {
			g.At(int64(1700000000 + n*60))
		}
	}
	commit := func() {
		tick()
		g.Write(fmt.Sprintf("f%d.txt", n), "x\n")
		g.Run("add", "-A")
		g.Run("commit", "-q", "-m", fmt.Sprint(n))
	}
	for range 5 {
		commit()
	}
	g.Run("branch", "behind", "HEAD~2")
	g.Run("checkout", "-q", "-b", "both", "HEAD~3")
	commit()
	commit()
	tick()
	g.Run("merge", "-q", "--no-edit", "main~1")
	commit()
	g.Run("checkout", "-q", "-b", "ahead", "main")
	commit()
	commit()
	g.Run("checkout", "-q", "-b", "mixed", "both~1")
	commit()
	tick()
	g.Run("merge", "-q", "--no-edit", "ahead")
	commit()
	g.Run("checkout", "-q", "--orphan", "other")
	commit()
	g.Run("checkout", "-q", "main")
	commit()
	tick()
	g.Run("merge", "-q", "--no-edit", "both")
	commit()
	rd := newReader(context.Background(), (&bombRepo{g: g}).objects(t), Limits{})
	id := func(rev string) object.ID { return object.MustID(g.Run("rev-parse", rev)) }
	branches := []string{"ahead", "behind", "both", "mixed", "other", "main"}
	want := map[string][2]int{}
	var heads []object.ID
	for _, b := range branches {
		var behind, ahead int
		if _, err := fmt.Sscan(g.Run("rev-list", "--left-right", "--count", "main..."+b), &behind, &ahead); err != nil {
			t.Fatal(err)
		}
		want[b] = [2]int{ahead, behind}
		heads = append(heads, id(b))
	}
	check := func(what, b string, got headCounts) {
		t.Helper()
		if [2]int{got.Ahead, got.Behind} != want[b] || !got.Complete || got.Head != id(b).String() {
			t.Errorf("%s %s: %+v, git: ahead %d behind %d", what, b, got, want[b][0], want[b][1])
		}
	}
	for _, b := range branches {
		got, err := rd.aheadBehind(id("main"), []object.ID{id(b)}, MaxAheadBehindWalk)
		if err != nil {
			t.Fatal(err)
		}
		check("alone", b, got.headCounts)
	}
	all, err := rd.aheadBehind(id("main"), heads, MaxAheadBehindWalk)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range branches {
		check("together", b, all.Heads[i])
	}
	const budget = 6
	cut, err := rd.aheadBehind(id("main"), heads, budget)
	if err != nil {
		t.Fatal(err)
	}
	settled := 0
	for i, b := range branches {
		h := cut.Heads[i]
		if h.Complete {
			settled++
			check("within a budget", b, h)
		} else if h.Ahead+h.Behind > budget {
			t.Errorf("a budget of %d commits: %s counted %+v", budget, b, h)
		}
	}
	if settled == len(branches) || cut.Heads[4].Complete {
		t.Errorf("a budget of %d commits settled %d of %d heads (other %+v): want the unrelated history cut", budget, settled, len(branches), cut.Heads[4])
	}
}

// taggedRepo is a repository of one commit on main, tagged v1.0 with an
// annotated tag of message msg, and a reader over its objects.
func taggedRepo(t *testing.T, msg string) (*gitrun.Repo, reader) {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("Tagger", "tag@x", "1700000000 +0000")})
	g.Write("a", "a\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "one")
	g.Run("tag", "-a", "v1.0", "-m", msg)
	return g, newReader(context.Background(), (&bombRepo{g: g}).objects(t), Limits{})
}

// TestTagAnswer: an annotated tag's target, tagger and message; a
// commit is not a tag.
func TestTagAnswer(t *testing.T) {
	g, rd := taggedRepo(t, "Release 1.0\n\nNotes.")
	tag, err := rd.tag(object.MustID(g.Run("rev-parse", "v1.0")))
	if err != nil {
		t.Fatal(err)
	}
	if tag.Name != "v1.0" || tag.Type != "commit" || tag.Object != g.Run("rev-parse", "main") || tag.Tagger == nil ||
		tag.Tagger.Name != "Tagger" || !strings.HasPrefix(tag.Tagger.Time, "2023-11-14") || tag.Message != "Release 1.0\n\nNotes.\n" {
		t.Errorf("tag answer %+v (tagger %+v)", tag, tag.Tagger)
	}
	if _, err := rd.tag(object.MustID(g.Run("rev-parse", "main"))); err == nil {
		t.Error("a commit read as a tag")
	}
}

// TestAheadBehindServed: several heads answer in the order asked, each
// id checked as the first is: a head the refs do not reach (a deleted
// branch's commit) is a 404 wherever it stands in the list.
func TestAheadBehindServed(t *testing.T) {
	r := newLocalRepo(t)
	srv := newTestHandler(t, nil, newLocal(t, r.open(t)))
	main := r.main.String()
	code, _, body := get(t, srv, "/api/alice/site/ahead-behind/"+main+"..."+main+","+main)
	want := `"heads":[{"head":"` + main + `","ahead":0,"behind":0,"complete":true},{"head":"` + main + `","ahead":0,"behind":0,"complete":true}]`
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("two heads: %d %s", code, body)
	}
	for _, heads := range []string{r.gone.String() + "," + main, main + "," + r.gone.String()} {
		if code, _, body := get(t, srv, "/api/alice/site/ahead-behind/"+main+"..."+heads); code != http.StatusNotFound {
			t.Errorf("heads %s: %d %s, want 404", heads, code, body)
		}
	}
}

// TestCommitsAnswer: each id read as a commit in the order asked, a tag
// peeled to its commit, a tree or a missing object answered as null.
func TestCommitsAnswer(t *testing.T) {
	g, rd := taggedRepo(t, "Release 1.0")
	main := g.Run("rev-parse", "main")
	ids := []object.ID{object.MustID(g.Run("rev-parse", "v1.0")), object.MustID(g.Run("rev-parse", "main^{tree}")),
		object.MustID(strings.Repeat("ab", 20)), object.MustID(main)}
	cs, err := rd.commits(ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 4 || cs[0] == nil || cs[0].OID != main || cs[0].Message != "one\n" || cs[1] != nil || cs[2] != nil ||
		cs[3] == nil || cs[3].OID != main {
		t.Errorf("commits answer %+v", cs)
	}
}

// TestCommitsServed: several ids answer in the order asked; one the refs
// do not reach (a deleted branch's commit) is a 404 wherever it stands,
// as for ahead-behind; more than MaxCommits is refused.
func TestCommitsServed(t *testing.T) {
	r := newLocalRepo(t)
	srv := newTestHandler(t, nil, newLocal(t, r.open(t)))
	main := r.main.String()
	code, _, body := get(t, srv, "/api/alice/site/commits/"+main+","+main)
	if code != http.StatusOK || strings.Count(body, `"oid":"`+main+`"`) != 2 || !strings.HasPrefix(body, "[") {
		t.Errorf("two ids: %d %s", code, body)
	}
	if code, _, body := get(t, srv, "/api/alice/site/commits/"+main+","+r.gone.String()); code != http.StatusNotFound {
		t.Errorf("an unreachable id: %d %s, want 404", code, body)
	}
	many := strings.TrimSuffix(strings.Repeat(main+",", MaxCommits+1), ",")
	if code, _, body := get(t, srv, "/api/alice/site/commits/"+many); code != http.StatusBadRequest {
		t.Errorf("%d ids: %d %s, want 400", MaxCommits+1, code, body)
	}
}
