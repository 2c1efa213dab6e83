package fsck

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// Severity is git's default message type for a check.
type Severity int8

// Severities, as in git's fsck.h. SevFatal, SevError and SevWarn reject an
// object (rgit behaves like receive.fsckObjects, where git promotes warnings
// to errors); SevInfo rejects only when Options.RejectInfo is set.
const (
	SevInfo Severity = iota
	SevWarn
	SevError
	SevFatal
)

func (s Severity) String() string {
	switch s {
	case SevInfo:
		return "info"
	case SevWarn:
		return "warn"
	case SevError:
		return "error"
	case SevFatal:
		return "fatal"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// CheckInfo describes one check.
type CheckInfo struct {
	ID       string   // git's msg id, camelCase ("zeroPaddedFilemode")
	Severity Severity // git's default severity
	Security bool     // never skippable
}

// Check ids, named as in git ("fsck.<id>" / "receive.fsck.<id>").
const (
	NulInHeader             = "nulInHeader"
	UnterminatedHeader      = "unterminatedHeader"
	UnknownType             = "unknownType"
	BadDate                 = "badDate"
	BadDateOverflow         = "badDateOverflow"
	BadEmail                = "badEmail"
	BadName                 = "badName"
	BadObjectSha1           = "badObjectSha1"
	BadParentSha1           = "badParentSha1"
	BadTimezone             = "badTimezone"
	BadTree                 = "badTree"
	BadTreeSha1             = "badTreeSha1"
	BadType                 = "badType"
	DuplicateEntries        = "duplicateEntries"
	MissingAuthor           = "missingAuthor"
	MissingCommitter        = "missingCommitter"
	MissingEmail            = "missingEmail"
	MissingNameBeforeEmail  = "missingNameBeforeEmail"
	MissingObject           = "missingObject"
	MissingSpaceBeforeDate  = "missingSpaceBeforeDate"
	MissingSpaceBeforeEmail = "missingSpaceBeforeEmail"
	MissingTag              = "missingTag"
	MissingTagEntry         = "missingTagEntry"
	MissingTree             = "missingTree"
	MissingType             = "missingType"
	MissingTypeEntry        = "missingTypeEntry"
	MultipleAuthors         = "multipleAuthors"
	TreeNotSorted           = "treeNotSorted"
	ZeroPaddedDate          = "zeroPaddedDate"
	GitmodulesMissing       = "gitmodulesMissing"
	GitmodulesBlob          = "gitmodulesBlob"
	GitmodulesName          = "gitmodulesName"
	GitmodulesSymlink       = "gitmodulesSymlink"
	GitmodulesURL           = "gitmodulesUrl"
	GitmodulesPath          = "gitmodulesPath"
	GitmodulesUpdate        = "gitmodulesUpdate"
	GitmodulesParse         = "gitmodulesParse"
	EmptyName               = "emptyName"
	FullPathname            = "fullPathname"
	HasDot                  = "hasDot"
	HasDotdot               = "hasDotdot"
	HasDotgit               = "hasDotgit"
	NullSha1                = "nullSha1"
	ZeroPaddedFilemode      = "zeroPaddedFilemode"
	NulInCommit             = "nulInCommit"
	LargePathname           = "largePathname"
	BadFilemode             = "badFilemode"
	GitignoreSymlink        = "gitignoreSymlink"
	GitattributesSymlink    = "gitattributesSymlink"
	MailmapSymlink          = "mailmapSymlink"
	BadTagName              = "badTagName"
	MissingTaggerEntry      = "missingTaggerEntry"
)

// checks is the registry; the package doc explains the classification.
var checks = []CheckInfo{
	// Structure: rgit's own parsers (and git's) depend on these.
	{NulInHeader, SevFatal, true},
	{UnterminatedHeader, SevFatal, true},
	{UnknownType, SevError, true},
	{BadObjectSha1, SevError, true},
	{BadParentSha1, SevError, true},
	{BadTree, SevError, true},
	{BadTreeSha1, SevError, true},
	{BadType, SevError, true},
	{MissingCommitter, SevError, true},
	{MissingObject, SevError, true},
	{MissingTag, SevError, true},
	{MissingTagEntry, SevError, true},
	{MissingTree, SevError, true},
	{MissingType, SevError, true},
	{MissingTypeEntry, SevError, true},
	// Trees whose checkout escapes the work tree, writes into .git, or
	// that different implementations could read differently.
	{DuplicateEntries, SevError, true},
	{TreeNotSorted, SevError, true},
	{EmptyName, SevWarn, true},
	{FullPathname, SevWarn, true},
	{HasDot, SevWarn, true},
	{HasDotdot, SevWarn, true},
	{HasDotgit, SevWarn, true},
	// Submodule configuration that runs commands or escapes on clone.
	{GitmodulesMissing, SevError, true},
	{GitmodulesBlob, SevError, true},
	{GitmodulesName, SevError, true},
	{GitmodulesSymlink, SevError, true},
	{GitmodulesURL, SevError, true},
	{GitmodulesPath, SevError, true},
	{GitmodulesUpdate, SevError, true},
	// Cosmetic: malformed but harmless; real histories contain them.
	{GitmodulesParse, SevError, false}, // git: info; rgit rejects by default
	{BadDate, SevError, false},
	{BadDateOverflow, SevError, false},
	{BadEmail, SevError, false},
	{BadName, SevError, false},
	{BadTimezone, SevError, false},
	{MissingAuthor, SevError, false},
	{MissingEmail, SevError, false},
	{MissingNameBeforeEmail, SevError, false},
	{MissingSpaceBeforeDate, SevError, false},
	{MissingSpaceBeforeEmail, SevError, false},
	{MultipleAuthors, SevError, false},
	{ZeroPaddedDate, SevError, false},
	{NullSha1, SevWarn, false},
	{ZeroPaddedFilemode, SevWarn, false},
	{NulInCommit, SevWarn, false},
	{LargePathname, SevWarn, false},
	{BadFilemode, SevInfo, false},
	{GitignoreSymlink, SevInfo, false},
	{GitattributesSymlink, SevInfo, false},
	{MailmapSymlink, SevInfo, false},
	{BadTagName, SevInfo, false},
	{MissingTaggerEntry, SevInfo, false},
}

var checkIndex = func() map[string]CheckInfo {
	m := make(map[string]CheckInfo, len(checks))
	for _, c := range checks {
		m[strings.ToLower(c.ID)] = c
	}
	return m
}()

// Checks lists every check with its severity and classification.
func Checks() []CheckInfo { return slices.Clone(checks) }

// Lookup returns the check named id (case-insensitive, as git matches).
func Lookup(id string) (CheckInfo, bool) {
	c, ok := checkIndex[strings.ToLower(id)]
	return c, ok
}

// Sentinel errors.
var (
	// ErrFsck is matched (errors.Is) by every *Error.
	ErrFsck = errors.New("fsck")
	// ErrUnknownCheck: a skip list names a check that does not exist.
	ErrUnknownCheck = errors.New("unknown fsck check")
	// ErrNotSkippable: a skip list names a security check.
	ErrNotSkippable = errors.New("fsck check may not be skipped")
)

// Error is a failed check of one object.
type Error struct {
	ID     object.ID
	Check  string // msg id, e.g. "hasDotgit"
	Detail string
}

func (e *Error) Error() string {
	return "object " + e.ID.String() + ": " + e.Check + ": " + e.Detail
}

// Is makes errors.Is(err, ErrFsck) true.
func (e *Error) Is(target error) bool { return target == ErrFsck }

// ParseSkipList parses a list of check ids separated by commas, spaces or
// '|' (as git's fsck.* option values are), e.g.
// "zeroPaddedFilemode,badTimezone", into a set keyed by canonical id.
// Unknown ids fail with ErrUnknownCheck, security checks with
// ErrNotSkippable.
func ParseSkipList(s string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == '|' || r == ' ' || r == '\t' || r == '\n'
	}) {
		c, ok := Lookup(f)
		if !ok {
			return nil, fmt.Errorf("skip list: %q: %w", f, ErrUnknownCheck)
		}
		if c.Security {
			return nil, fmt.Errorf("skip list: %s: %w", c.ID, ErrNotSkippable)
		}
		set[c.ID] = true
	}
	return set, nil
}
