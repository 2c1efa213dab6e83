package object

import (
	"errors"
	"strings"
	"testing"
)

func TestHashMatchesGit(t *testing.T) {
	// `printf 'hello\n' | git hash-object --stdin`
	if got := Hash(Blob, []byte("hello\n")).String(); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Fatalf("hash = %s", got)
	}
	// The empty tree every git knows.
	if got := Hash(Tree, nil).String(); got != "4b825dc642cb6eb9a060e54bf8d69288fbee4904" {
		t.Fatalf("empty tree = %s", got)
	}
}

func TestParseID(t *testing.T) {
	for _, bad := range []string{"", "abc", "zz013625030ba8dba906f756967f9e9ca394464a", "ce013625030ba8dba906f756967f9e9ca394464a0"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
	id := MustID("ce013625030ba8dba906f756967f9e9ca394464a")
	if id.String() != "ce013625030ba8dba906f756967f9e9ca394464a" || id.IsZero() || !ZeroID.IsZero() {
		t.Fatal("round trip")
	}
}

const (
	treeHex   = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	parentHex = "ce013625030ba8dba906f756967f9e9ca394464a"
)

func TestParseCommit(t *testing.T) {
	good := "tree " + treeHex + "\nparent " + parentHex + "\nparent " + parentHex +
		"\nauthor A <a@b> 1 +0000\ncommitter C <c@d> 1700000000 +0100\n\nmsg\n"
	c, err := ParseCommit([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tree.String() != treeHex || len(c.Parents) != 2 || c.CommitterTime != 1700000000 {
		t.Fatalf("parsed %+v", c)
	}
	for name, bad := range map[string]string{
		"no tree":        "parent " + parentHex + "\n",
		"short tree":     "tree abc\ncommitter C <c@d> 1 +0000\n",
		"upper hex":      "tree 4B825DC642CB6EB9A060E54BF8D69288FBEE4904\ncommitter C <c@d> 1 +0000\n",
		"bad parent":     "tree " + treeHex + "\nparent xyz\ncommitter C <c@d> 1 +0000\n",
		"no committer":   "tree " + treeHex + "\nauthor A <a@b> 1 +0000\n\nmsg",
		"bad time":       "tree " + treeHex + "\ncommitter C <c@d> soon +0000\n",
		"no email":       "tree " + treeHex + "\ncommitter C 1 +0000\n",
		"truncated":      "tree " + treeHex,
		"empty":          "",
		"no time at all": "tree " + treeHex + "\ncommitter C <c@d>\n",
	} {
		if _, err := ParseCommit([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestParseTag(t *testing.T) {
	tag, err := ParseTag([]byte("object " + parentHex + "\ntype commit\ntag v1\ntagger T <t@t> 1 +0000\n\nmsg\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tag.ObjectType != Commit || string(tag.Name) != "v1" || tag.Object.String() != parentHex {
		t.Fatalf("parsed %+v", tag)
	}
	for _, bad := range []string{"", "object x\n", "object " + parentHex + "\ntype bogus\ntag v\n", "object " + parentHex + "\ntype blob\n"} {
		if _, err := ParseTag([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseTag(%q) err = %v", bad, err)
		}
	}
}

func TestTreeIter(t *testing.T) {
	var raw []byte
	id := MustID(parentHex)
	raw = append(raw, "100644 a.txt\x00"...)
	raw = append(raw, id[:]...)
	raw = append(raw, "40000 dir\x00"...)
	raw = append(raw, id[:]...)
	raw = append(raw, "160000 sub\x00"...)
	raw = append(raw, id[:]...)
	it := NewTreeIter(raw)
	var names []string
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		names = append(names, string(e.Name))
		if e.ID != id {
			t.Fatal("id")
		}
		switch string(e.Name) {
		case "dir":
			if !e.IsTree() || string(e.RawMode) != "40000" {
				t.Fatal("dir mode")
			}
		case "sub":
			if !e.IsGitlink() {
				t.Fatal("gitlink")
			}
		}
	}
	if it.Err() != nil || len(names) != 3 {
		t.Fatalf("names %v err %v", names, it.Err())
	}
	for _, bad := range []string{"100644 a", "1x0644 a\x00" + string(id[:]), " a\x00" + string(id[:]), "100644 a\x00short", "77777777 a\x00" + string(id[:])} {
		it := NewTreeIter([]byte(bad))
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		if !errors.Is(it.Err(), ErrMalformed) {
			t.Errorf("tree %q: err = %v", bad, it.Err())
		}
	}
}

func TestTypes(t *testing.T) {
	for _, ty := range []Type{Commit, Tree, Blob, Tag} {
		got, err := ParseType(ty.String())
		if err != nil || got != ty {
			t.Fatalf("%v round trip: %v %v", ty, got, err)
		}
	}
	if _, err := ParseType("ofs-delta"); err == nil {
		t.Fatal("delta is not an object type")
	}
	if Type(5).String() != "type(5)" {
		t.Fatal(Type(5).String())
	}
}

func TestParseHex(t *testing.T) {
	good := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{strings.ToUpper(good), false}, // git writes lowercase only
		{good[:39], false},
		{good + "0", false},
		{good[:39] + "g", false},
		{"", false},
	} {
		id, ok := ParseHex(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseHex(%q) ok = %v, want %v", tc.in, ok, tc.ok)
		}
		if ok && id.String() != tc.in {
			t.Errorf("ParseHex(%q) = %s", tc.in, id)
		}
		if idb, okb := ParseHex([]byte(tc.in)); okb != ok || idb != id {
			t.Errorf("ParseHex([]byte(%q)) differs from the string form", tc.in)
		}
	}
}
