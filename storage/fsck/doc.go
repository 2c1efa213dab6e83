// Package fsck checks objects arriving in a push the way git's fsck.c does
// under receive.fsckObjects: tree entry names and modes, commit and tag
// headers and identities, and .gitmodules content. It is pure code: no
// I/O, no logging; it imports only the standard library and
// storage/object.
//
// A Checker is fed objects (possibly from several goroutines) with Check.
// Trees that name a blob .gitmodules (in any spelling HFS+ or NTFS would
// map to it) make that blob subject to the .gitmodules checks: if the blob
// is checked after the tree, Check runs them; otherwise GitmodulesBlobs
// lists it for the caller to read and pass to CheckGitmodules.
//
// # Checks, severities and classes
//
// Check ids are git's msg ids in camelCase; Severity is git's default.
// Whether a finding rejects its object depends on the check's Class (see
// Rejects, a pure decision with a table test):
//
//   - Security: always rejected, never skippable. The object is malformed
//     in a way rgit's parsers or git clients depend on, or is an exploit.
//   - Guard: rejected by default, skippable (RGIT_FSCK_SKIP). Harmless to
//     rgit but risky for some client.
//   - Cosmetic: accepted by default and reported through
//     Checker.Accepted for the caller to log; rejected with Options.Strict
//     (RGIT_FSCK_STRICT), where rgit behaves like git's
//     receive.fsckObjects: fatal, error and warn findings reject, info
//     findings only with Options.RejectInfo. Real public histories contain
//     these (zero-padded modes in old trees, bad time zones).
//
// The classes:
//
//	security:  nulInHeader, unterminatedHeader, unknownType, badObjectSha1,
//	           badParentSha1, badTree, badTreeSha1, badType,
//	           missingCommitter, missingObject, missingTag, missingTagEntry,
//	           missingTree, missingType, missingTypeEntry (structure);
//	           duplicateEntries, treeNotSorted, emptyName, fullPathname,
//	           hasDot, hasDotdot, hasDotgit (trees); gitmodulesMissing,
//	           gitmodulesBlob, gitmodulesName, gitmodulesSymlink,
//	           gitmodulesUrl, gitmodulesPath, gitmodulesUpdate (submodules)
//	guard:     gitmodulesParse (an unparseable .gitmodules another parser
//	           could read differently), gitignoreSymlink,
//	           gitattributesSymlink, mailmapSymlink
//	cosmetic:  badDate, badDateOverflow, badEmail, badName, badTimezone,
//	           missingAuthor, missingEmail, missingNameBeforeEmail,
//	           missingSpaceBeforeDate, missingSpaceBeforeEmail,
//	           multipleAuthors, zeroPaddedDate (error); nullSha1,
//	           zeroPaddedFilemode, nulInCommit, largePathname (warn);
//	           badFilemode, badTagName, missingTaggerEntry (info)
//
// Deliberate differences from git: object ids in headers must be
// lowercase hex (rgit's parsers require it); submodule names may not be
// absolute; a .gitmodules entry with tree or gitlink mode fails at once
// with gitmodulesBlob; a tree with several findings returns only the
// first rejecting one. Not implemented: .gitattributes content checks
// (gitattributesLarge/LineLength), gitmodulesLarge (the caller holds the
// whole blob), and extraHeaderEntry (ignored by git by default).
package fsck
