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
// # Checks and severities
//
// Check ids are git's msg ids in camelCase. Severity is git's default;
// like `receive.fsckObjects=true` (index-pack --strict), rgit rejects
// fatal, error and warn findings and ignores info findings unless
// Options.RejectInfo is set.
//
// Security checks are never skippable: objects failing them are malformed
// in a way rgit's parsers or git clients depend on, or are exploits.
//
//	structure:  nulInHeader, unterminatedHeader (fatal), unknownType,
//	            badObjectSha1, badParentSha1, badTree, badTreeSha1, badType,
//	            missingCommitter, missingObject, missingTag, missingTagEntry,
//	            missingTree, missingType, missingTypeEntry (error)
//	trees:      duplicateEntries, treeNotSorted (error); emptyName,
//	            fullPathname, hasDot, hasDotdot, hasDotgit (warn)
//	submodules: gitmodulesMissing, gitmodulesBlob, gitmodulesName,
//	            gitmodulesSymlink, gitmodulesUrl, gitmodulesPath,
//	            gitmodulesUpdate (error)
//
// Cosmetic checks may be skipped (Options.Skip, ParseSkipList); real
// histories contain them (e.g. zeroPaddedFilemode in old repositories):
//
//	error: gitmodulesParse (info in git; rgit rejects an unparseable
//	       .gitmodules by default so that no other parser can read it
//	       differently), badDate, badDateOverflow, badEmail, badName,
//	       badTimezone, missingAuthor, missingEmail, missingNameBeforeEmail,
//	       missingSpaceBeforeDate, missingSpaceBeforeEmail, multipleAuthors,
//	       zeroPaddedDate
//	warn:  nullSha1, zeroPaddedFilemode, nulInCommit, largePathname
//	info:  badFilemode, gitignoreSymlink, gitattributesSymlink,
//	       mailmapSymlink, badTagName, missingTaggerEntry
//
// Deliberate differences from git: object ids in headers must be
// lowercase hex (rgit's parsers require it); submodule names may not be
// absolute; a .gitmodules entry with tree or gitlink mode fails at once
// with gitmodulesBlob; a tree with several findings returns only the
// first rejecting one. Not implemented: .gitattributes content checks
// (gitattributesLarge/LineLength), gitmodulesLarge (the caller holds the
// whole blob), and extraHeaderEntry (ignored by git by default).
package fsck
