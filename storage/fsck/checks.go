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

// Severities, as in git's fsck.h. Whether a finding rejects the object is
// decided by Rejects from the check's class, not from its severity alone.
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

// Class says how rgit treats a check's findings.
type Class int8

const (
	// Cosmetic findings are malformed but harmless, and real public
	// histories contain them: accepted (and logged) by default, rejected
	// under Options.Strict, skippable.
	Cosmetic Class = iota
	// Guard findings are harmless to rgit but dangerous to some client
	// (an unparseable .gitmodules, a symlinked .gitignore): rejected by
	// default, skippable.
	Guard
	// Security findings break rgit's parsers or are exploits (.git path
	// variants, submodule URLs that run commands): always rejected, never
	// skippable.
	Security
)

// CheckInfo describes one check.
type CheckInfo struct {
	ID       string   // git's msg id, camelCase ("zeroPaddedFilemode")
	Severity Severity // git's default severity
	Class    Class
}

// Rejects decides whether a finding of c fails the object. skipped: the
// operator listed c in RGIT_FSCK_SKIP; strict: RGIT_FSCK_STRICT, which
// rejects every finding git itself would reject under receive.fsckObjects
// (fatal, error and warn); rejectInfo adds git's info-level findings.
func Rejects(c CheckInfo, skipped, strict, rejectInfo bool) bool {
	switch {
	case c.Class == Security:
		return true
	case skipped:
		return false
	case c.Class == Guard:
		return true
	case strict:
		return c.Severity != SevInfo || rejectInfo
	}
	return false
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
	{NulInHeader, SevFatal, Security},
	{UnterminatedHeader, SevFatal, Security},
	{UnknownType, SevError, Security},
	{BadObjectSha1, SevError, Security},
	{BadParentSha1, SevError, Security},
	{BadTree, SevError, Security},
	{BadTreeSha1, SevError, Security},
	{BadType, SevError, Security},
	{MissingCommitter, SevError, Security},
	{MissingObject, SevError, Security},
	{MissingTag, SevError, Security},
	{MissingTagEntry, SevError, Security},
	{MissingTree, SevError, Security},
	{MissingType, SevError, Security},
	{MissingTypeEntry, SevError, Security},
	// Trees whose checkout escapes the work tree, writes into .git, or
	// that different implementations could read differently.
	{DuplicateEntries, SevError, Security},
	{TreeNotSorted, SevError, Security},
	{EmptyName, SevWarn, Security},
	{FullPathname, SevWarn, Security},
	{HasDot, SevWarn, Security},
	{HasDotdot, SevWarn, Security},
	{HasDotgit, SevWarn, Security},
	// Submodule configuration that runs commands or escapes on clone.
	{GitmodulesMissing, SevError, Security},
	{GitmodulesBlob, SevError, Security},
	{GitmodulesName, SevError, Security},
	{GitmodulesSymlink, SevError, Security},
	{GitmodulesURL, SevError, Security},
	{GitmodulesPath, SevError, Security},
	{GitmodulesUpdate, SevError, Security},
	// Guards: harmless to rgit, but a client could read them differently
	// or follow a symlink out of the work tree.
	{GitmodulesParse, SevError, Guard}, // git: info
	{GitignoreSymlink, SevInfo, Guard},
	{GitattributesSymlink, SevInfo, Guard},
	{MailmapSymlink, SevInfo, Guard},
	// Cosmetic: malformed but harmless; real histories contain them.
	{BadDate, SevError, Cosmetic},
	{BadDateOverflow, SevError, Cosmetic},
	{BadEmail, SevError, Cosmetic},
	{BadName, SevError, Cosmetic},
	{BadTimezone, SevError, Cosmetic},
	{MissingAuthor, SevError, Cosmetic},
	{MissingEmail, SevError, Cosmetic},
	{MissingNameBeforeEmail, SevError, Cosmetic},
	{MissingSpaceBeforeDate, SevError, Cosmetic},
	{MissingSpaceBeforeEmail, SevError, Cosmetic},
	{MultipleAuthors, SevError, Cosmetic},
	{ZeroPaddedDate, SevError, Cosmetic},
	{NullSha1, SevWarn, Cosmetic},
	{ZeroPaddedFilemode, SevWarn, Cosmetic},
	{NulInCommit, SevWarn, Cosmetic},
	{LargePathname, SevWarn, Cosmetic},
	{BadFilemode, SevInfo, Cosmetic},
	{BadTagName, SevInfo, Cosmetic},
	{MissingTaggerEntry, SevInfo, Cosmetic},
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
		if c.Class == Security {
			return nil, fmt.Errorf("skip list: %s: %w", c.ID, ErrNotSkippable)
		}
		set[c.ID] = true
	}
	return set, nil
}
