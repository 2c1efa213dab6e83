package fsck

import (
	"testing"

	"github.com/rgit/rgit/storage/object"
)

const (
	treeLine   = "tree " + hex40
	parentLine = "parent " + parentHex
	author     = "author A U Thor <author@example.com> 1234567890 +0200"
	committer  = "committer C O Mitter <c@example.com> 1234567890 -0700"
)

// commitWithAuthor is a valid commit whose author identity is ident.
func commitWithAuthor(ident string) []byte {
	return lines(treeLine, "author "+ident, committer, "", "msg")
}

// commitCases each trigger one check (want) or none.
var commitCases = []struct {
	name string
	data []byte
	want string
}{
	{"valid", lines(treeLine, parentLine, parentLine, author, committer, "", "msg"), ""},
	{"valid no body", lines(treeLine, author, committer), ""},
	{"valid extra headers", lines(treeLine, author, committer, "encoding ISO-8859-1", "gpgsig x", " y", "", "msg"), ""},
	{"valid date 0", commitWithAuthor("A <a> 0 +0000"), ""},
	{"valid empty name and email", commitWithAuthor(" <> 1 +0000"), ""},
	{"nulInHeader", []byte(treeLine + "\n" + author + "\x00\n" + committer + "\n\nmsg"), NulInHeader},
	{"unterminatedHeader", []byte(treeLine + "\n" + author + "\n" + committer), UnterminatedHeader},
	{"unterminatedHeader empty", nil, UnterminatedHeader},
	{"missingTree", lines(parentLine, author, committer, "", "m"), MissingTree},
	{"missingTree blank first", lines("", treeLine), MissingTree},
	{"badTreeSha1 short", lines("tree 1234", author, committer), BadTreeSha1},
	{"badTreeSha1 uppercase", lines("tree 4B825DC642CB6EB9A060E54BF8D69288FBEE4904", author, committer), BadTreeSha1},
	{"badTreeSha1 trailing", lines(treeLine+" ", author, committer), BadTreeSha1},
	{"badParentSha1", lines(treeLine, "parent zz", author, committer), BadParentSha1},
	{"missingAuthor", lines(treeLine, committer), MissingAuthor},
	{"multipleAuthors", lines(treeLine, author, author, committer), MultipleAuthors},
	{"missingCommitter", lines(treeLine, author, "", "msg"), MissingCommitter},
	{"missingCommitter wrong order", lines(treeLine, committer, author), MissingAuthor},
	{"parent after author", lines(treeLine, author, parentLine, committer), MissingCommitter},
	{"missingNameBeforeEmail", commitWithAuthor("<a@b> 1 +0000"), MissingNameBeforeEmail},
	{"missingEmail", commitWithAuthor("A 1 +0000"), MissingEmail},
	{"badName", commitWithAuthor("A> <a> 1 +0000"), BadName},
	{"missingSpaceBeforeEmail", commitWithAuthor("A<a> 1 +0000"), MissingSpaceBeforeEmail},
	{"badEmail unterminated", commitWithAuthor("A <a 1 +0000"), BadEmail},
	{"badEmail nested", commitWithAuthor("A <a<b> 1 +0000"), BadEmail},
	{"missingSpaceBeforeDate", commitWithAuthor("A <a>1 +0000"), MissingSpaceBeforeDate},
	{"missingSpaceBeforeDate end", commitWithAuthor("A <a>"), MissingSpaceBeforeDate},
	{"zeroPaddedDate", commitWithAuthor("A <a> 0123 +0000"), ZeroPaddedDate},
	{"badDate letters", commitWithAuthor("A <a> x +0000"), BadDate},
	{"badDate suffix", commitWithAuthor("A <a> 12x +0000"), BadDate},
	{"badDate sign", commitWithAuthor("A <a> +12 +0000"), BadDate},
	{"badDate missing", commitWithAuthor("A <a> "), BadDate},
	{"badDate no zone", commitWithAuthor("A <a> 12"), BadDate},
	{"badDateOverflow", commitWithAuthor("A <a> 99999999999999999999 +0000"), BadDateOverflow},
	{"badDateOverflow int64", commitWithAuthor("A <a> 9223372036854775808 +0000"), BadDateOverflow},
	{"max int64 date", commitWithAuthor("A <a> 9223372036854775807 +0000"), ""},
	{"badTimezone short", commitWithAuthor("A <a> 1 +000"), BadTimezone},
	{"badTimezone long", commitWithAuthor("A <a> 1 +00000"), BadTimezone},
	{"badTimezone unsigned", commitWithAuthor("A <a> 1 0000"), BadTimezone},
	{"badTimezone letter", commitWithAuthor("A <a> 1 +0a00"), BadTimezone},
	{"badTimezone trailing", commitWithAuthor("A <a> 1 +0000 "), BadTimezone},
	{"committer ident checked", lines(treeLine, author, "committer C <c> 1 +00"), BadTimezone},
	{"nulInCommit", []byte(treeLine + "\n" + author + "\n" + committer + "\n\nmsg\x00"), NulInCommit},
}

func TestCommitChecks(t *testing.T) {
	for _, tc := range commitCases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(Options{Strict: true})
			err := c.Check(object.Hash(object.Commit, tc.data), object.Commit, tc.data)
			if got := checkName(t, err); got != tc.want {
				t.Fatalf("Check = %v, want check %q", err, tc.want)
			}
		})
	}
}

func TestCommitSkipContinues(t *testing.T) {
	data := lines(treeLine, "author A <a> 1 +00", "committer C 1 +0000")
	skip, err := ParseSkipList("badTimezone")
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker(Options{Strict: true, Skip: skip})
	if got := checkName(t, c.Check(commitID, object.Commit, data)); got != MissingEmail {
		t.Fatalf("got %q, want missingEmail from the committer line", got)
	}
	skip, err = ParseSkipList("badTimezone,missingEmail")
	if err != nil {
		t.Fatal(err)
	}
	c = NewChecker(Options{Strict: true, Skip: skip})
	if err := c.Check(commitID, object.Commit, data); err != nil {
		t.Fatalf("all findings skipped, got %v", err)
	}
}

const (
	obj    = "object " + targetHex
	typ    = "type commit"
	tag    = "tag v1.0"
	tagger = "tagger T <t@example.com> 1234567890 +0000"
)

// tagCases each trigger one check (want, with RejectInfo if info) or none.
var tagCases = []struct {
	name string
	data []byte
	want string
	info bool
}{
	{"valid", lines(obj, typ, tag, tagger, "", "msg"), "", true},
	{"valid tree target", lines("object "+hex40, "type tree", tag, tagger), "", true},
	{"nulInHeader", []byte(obj + "\n" + typ + "\x00\n"), NulInHeader, false},
	{"unterminatedHeader", []byte(obj + "\n" + typ + "\n" + tag + "\n" + tagger), UnterminatedHeader, false},
	{"missingObject", lines(typ, tag, tagger), MissingObject, false},
	{"badObjectSha1", lines("object 123", typ, tag, tagger), BadObjectSha1, false},
	{"missingTypeEntry", lines(obj, tag, tagger), MissingTypeEntry, false},
	{"badType", lines(obj, "type bolb", tag, tagger), BadType, false},
	{"badType delta", lines(obj, "type ofs-delta", tag, tagger), BadType, false},
	{"missingTagEntry", lines(obj, typ, tagger), MissingTagEntry, false},
	{"badTagName ignored by default", lines(obj, typ, "tag a..b", tagger), "", false},
	{"badTagName", lines(obj, typ, "tag a..b", tagger), BadTagName, true},
	{"badTagName lock", lines(obj, typ, "tag x.lock", tagger), BadTagName, true},
	{"badTagName space", lines(obj, typ, "tag a b", tagger), BadTagName, true},
	{"badTagName empty", lines(obj, typ, "tag ", tagger), BadTagName, true},
	{"badTagName dot component", lines(obj, typ, "tag a/.b", tagger), BadTagName, true},
	{"badTagName trailing slash", lines(obj, typ, "tag a/", tagger), BadTagName, true},
	{"badTagName at-brace", lines(obj, typ, "tag a@{1}", tagger), BadTagName, true},
	{"good nested tag name", lines(obj, typ, "tag release/v1.0-rc1", tagger), "", true},
	{"missingTaggerEntry ignored by default", lines(obj, typ, tag, "", "msg"), "", false},
	{"missingTaggerEntry", lines(obj, typ, tag, "", "msg"), MissingTaggerEntry, true},
	{"tagger ident checked", lines(obj, typ, tag, "tagger T <t> 1"), BadDate, false},
}

func TestTagChecks(t *testing.T) {
	for _, tc := range tagCases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(Options{Strict: true, RejectInfo: tc.info})
			err := c.Check(object.Hash(object.Tag, tc.data), object.Tag, tc.data)
			if got := checkName(t, err); got != tc.want {
				t.Fatalf("Check = %v, want check %q", err, tc.want)
			}
		})
	}
}

func TestUnknownType(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	if got := checkName(t, c.Check(commitID, object.OfsDelta, nil)); got != UnknownType {
		t.Fatalf("got %q, want unknownType", got)
	}
}
