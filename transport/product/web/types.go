package web

import (
	"strings"
	"time"
)

// The read API's JSON, as the page reads it (docs/read-api.md).

// Ref is one entry of GET refs.
type Ref struct {
	Name   string `json:"name"`
	OID    string `json:"oid"`
	Kind   string `json:"kind"`
	Peeled string `json:"peeled,omitempty"`
	// Target is HEAD's symref target.
	Target string `json:"target,omitempty"`
}

// Commit is the commit id a ref leads to (a tag's peeled id).
func (r Ref) Commit() string {
	if r.Peeled != "" {
		return r.Peeled
	}
	return r.OID
}

// Short is the ref name without refs/heads/ or refs/tags/.
func (r Ref) Short() string {
	for _, p := range []string{"refs/heads/", "refs/tags/"} {
		if s, ok := strings.CutPrefix(r.Name, p); ok {
			return s
		}
	}
	return r.Name
}

// Entry is one entry of GET tree.
type Entry struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	Kind string `json:"kind"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

// Blob is GET blob's answer.
type Blob struct {
	OID       string `json:"oid"`
	Size      int64  `json:"size"`
	Binary    bool   `json:"binary"`
	Truncated bool   `json:"truncated"`
	Content   string `json:"content"`
	// LFS is set when the file is stored with Git LFS (the blob is its
	// pointer).
	LFS *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs,omitempty"`
}

// Person is a commit's author or committer.
type Person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Time  When   `json:"time"`
}

// When is a commit time (RFC 3339 in the API's JSON).
type When struct{ time.Time }

// Commit is one commit of GET log, and the head of GET commit.
type Commit struct {
	OID       string   `json:"oid"`
	Parents   []string `json:"parents"`
	Author    Person   `json:"author"`
	Committer Person   `json:"committer"`
	Message   string   `json:"message"`
}

// Subject is the message's first line.
func (c Commit) Subject() string {
	s, _, _ := strings.Cut(c.Message, "\n")
	return s
}

// Body is the message after its first line.
func (c Commit) Body() string {
	_, b, _ := strings.Cut(c.Message, "\n")
	return strings.TrimSpace(b)
}

// FileChange is one file of a commit or comparison.
type FileChange struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path,omitempty"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// CommitDetail is GET commit's answer.
type CommitDetail struct {
	Commit
	Files     []FileChange `json:"files"`
	Diff      string       `json:"diff"`
	Truncated bool         `json:"truncated,omitempty"`
	// TruncatedReason names the limit that cut the diff short.
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// Comparison is GET compare's answer.
type Comparison struct {
	Base      string       `json:"base"`
	Head      string       `json:"head"`
	MergeBase string       `json:"merge_base"`
	Ahead     int          `json:"ahead"`
	Behind    int          `json:"behind"`
	Commits   []Commit     `json:"commits"`
	Files     []FileChange `json:"files"`
	Diff      string       `json:"diff"`
	Truncated bool         `json:"truncated,omitempty"`
	// TruncatedReason names the limit that cut the diff short.
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// RepoList is GET /api/repos's answer: who the caller is and one page of
// the repositories they may read (their own first).
type RepoList struct {
	Viewer    string     `json:"viewer"`
	Repos     []RepoItem `json:"repos"`
	Truncated bool       `json:"truncated,omitempty"`
	// Page is this page's number (from 1); More: a next page follows.
	Page int  `json:"page"`
	More bool `json:"more,omitempty"`
}

// RepoItem is one repository of RepoList.
type RepoItem struct {
	Owner  string `json:"owner"`
	Name   string `json:"name"`
	Public bool   `json:"public"`
}
