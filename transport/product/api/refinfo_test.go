package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestAheadBehindMatchesGit: the counts are git rev-list --left-right
// --count main...branch for a branch ahead, one behind, one both (with a
// merge from main), an unrelated history and main itself, with dates
// that grow and with one date for all; a small budget stops the walk and
// says so.
func TestAheadBehindMatchesGit(t *testing.T) {
	for _, growing := range []bool{true, false} {
		t.Run(fmt.Sprint("growing dates ", growing), func(t *testing.T) { aheadBehindMatchesGit(t, growing) })
	}
}

func aheadBehindMatchesGit(t *testing.T, growing bool) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	n := 0
	commit := func() {
		n++
		if growing {
			g.At(int64(1700000000 + n*60))
		}
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
	n++
	if growing {
		g.At(int64(1700000000 + n*60))
	}
	g.Run("merge", "-q", "--no-edit", "main~1")
	commit()
	g.Run("checkout", "-q", "-b", "ahead", "main")
	commit()
	commit()
	g.Run("checkout", "-q", "--orphan", "other")
	commit()
	g.Run("checkout", "-q", "main")
	commit()
	rd := newReader(context.Background(), (&bombRepo{g: g}).objects(t), Limits{})
	id := func(rev string) object.ID { return object.MustID(g.Run("rev-parse", rev)) }
	for _, b := range []string{"ahead", "behind", "both", "other", "main"} {
		got, err := rd.aheadBehind(id("main"), id(b), MaxAheadBehindWalk)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Fields(g.Run("rev-list", "--left-right", "--count", "main..."+b))
		if fmt.Sprint(got.Behind) != want[0] || fmt.Sprint(got.Ahead) != want[1] || !got.Complete {
			t.Errorf("%s: ahead %d behind %d complete %v, git: behind %s ahead %s", b, got.Ahead, got.Behind, got.Complete, want[0], want[1])
		}
	}
	got, err := rd.aheadBehind(id("main"), id("other"), 4)
	if err != nil {
		t.Fatal(err)
	}
	if got.Complete || got.Ahead+got.Behind > 4 {
		t.Errorf("a budget of 4 commits: %+v, want incomplete and at most 4 counted", got)
	}
}

// TestTagAnswer: an annotated tag's target, tagger and message; a
// commit is not a tag.
func TestTagAnswer(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("Tagger", "tag@x", "1700000000 +0000")})
	g.Write("a", "a\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "one")
	g.Run("tag", "-a", "v1.0", "-m", "Release 1.0\n\nNotes.")
	rd := newReader(context.Background(), (&bombRepo{g: g}).objects(t), Limits{})
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
