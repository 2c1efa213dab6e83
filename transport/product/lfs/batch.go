package lfs

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Limits bound what one client may ask of a node (docs/operations.md: Limits).
type Limits struct {
	// MaxObjectSize is the largest object an upload may declare
	// (RGIT_LFS_MAX_OBJECT_SIZE; S3 takes at most 5 GiB in one PUT).
	MaxObjectSize int64
	// MaxBatchObjects bounds the objects of one batch request
	// (RGIT_LFS_MAX_BATCH_OBJECTS).
	MaxBatchObjects int
	// MaxAnonBatchObjects bounds the objects of one batch request from a
	// caller without credentials (RGIT_LFS_MAX_ANON_BATCH_OBJECTS): each
	// object costs a store lookup, and a stranger gets few of them.
	MaxAnonBatchObjects int
	// MaxBatchBytes bounds a batch request's body, read before it is
	// parsed (RGIT_LFS_MAX_BATCH_BYTES).
	MaxBatchBytes int64
}

// Defaults of Limits' fields.
const (
	DefaultMaxObjectSize   = 5 << 30
	DefaultMaxBatchObjects = 1000
	// DefaultMaxAnonBatchObjects is what git-lfs sends in one batch.
	DefaultMaxAnonBatchObjects = 100
	DefaultMaxBatchBytes       = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxObjectSize <= 0 {
		l.MaxObjectSize = DefaultMaxObjectSize
	}
	if l.MaxBatchObjects <= 0 {
		l.MaxBatchObjects = DefaultMaxBatchObjects
	}
	if l.MaxAnonBatchObjects <= 0 {
		l.MaxAnonBatchObjects = DefaultMaxAnonBatchObjects
	}
	if l.MaxBatchBytes <= 0 {
		l.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return l
}

func (l Limits) objectTooLarge() error {
	return &gitproto.LimitError{What: "object too large", Limit: l.MaxObjectSize, Unit: "bytes", Setting: "RGIT_LFS_MAX_OBJECT_SIZE"}
}

func (l Limits) tooManyObjects() error {
	return &gitproto.LimitError{What: "too many objects in one batch", Limit: int64(l.MaxBatchObjects), Setting: "RGIT_LFS_MAX_BATCH_OBJECTS"}
}

func (l Limits) tooManyAnonObjects() error {
	return &gitproto.LimitError{What: "too many objects in one batch without credentials", Limit: int64(l.MaxAnonBatchObjects),
		Setting: "RGIT_LFS_MAX_ANON_BATCH_OBJECTS", Hint: "authenticate to send more"}
}

func (l Limits) batchTooLarge() error {
	return &gitproto.LimitError{What: "batch request too large", Limit: l.MaxBatchBytes, Unit: "bytes", Setting: "RGIT_LFS_MAX_BATCH_BYTES"}
}

// ActionTTL is how long the actions of a batch answer (presigned URLs,
// node tickets) stay valid: a transfer must start within it. git-lfs asks
// again for actions that expired before it got to them.
const ActionTTL = 15 * time.Minute

// The batch API's JSON (git-lfs docs/api/batch.md).
type (
	batchRequest struct {
		Operation string       `json:"operation"`
		Transfers []string     `json:"transfers,omitempty"`
		Ref       *refSpec     `json:"ref,omitempty"`
		Objects   []objectSpec `json:"objects"`
		HashAlgo  string       `json:"hash_algo,omitempty"`
	}
	refSpec struct {
		Name string `json:"name"`
	}
	objectSpec struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	}
	batchResponse struct {
		Transfer string         `json:"transfer"`
		Objects  []objectAnswer `json:"objects"`
		HashAlgo string         `json:"hash_algo"`
	}
	objectAnswer struct {
		OID           string            `json:"oid"`
		Size          int64             `json:"size"`
		Authenticated bool              `json:"authenticated,omitempty"`
		Actions       map[string]action `json:"actions,omitempty"`
		Error         *objectError      `json:"error,omitempty"`
	}
	action struct {
		Href      string            `json:"href"`
		Header    map[string]string `json:"header,omitempty"`
		ExpiresIn int               `json:"expires_in,omitempty"`
	}
	objectError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
)

// Transfer adapters: basic over HTTP; ssh is what the SSH transfer asks
// for its own batch (actions without hrefs: the bytes go over SSH).
const (
	transferBasic = "basic"
	transferSSH   = "ssh"
)

// errConflict is a batch-level refusal answered 409 (an unsupported hash
// algorithm, as the spec asks).
var errConflict = errors.New("conflict")

// checkBatch validates a whole request: the operation, the hash algorithm
// and the number of objects, fewer for an anonymous caller. It returns
// the transfer the answer uses. It runs before the access decision and
// asks the store nothing, so a private repository's answer is a missing
// one's.
func checkBatch(req *batchRequest, l Limits, anonymous bool) (string, error) {
	if req.Operation != opUpload && req.Operation != opDownload {
		return "", fmt.Errorf("%w: operation must be upload or download, not %q", gitproto.ErrProtocol, req.Operation)
	}
	if req.HashAlgo != "" && req.HashAlgo != "sha256" {
		return "", fmt.Errorf("%w: hash algorithm %q is not supported (sha256 is)", errConflict, req.HashAlgo)
	}
	switch {
	case len(req.Objects) > l.MaxBatchObjects:
		return "", l.tooManyObjects()
	case anonymous && len(req.Objects) > l.MaxAnonBatchObjects:
		return "", l.tooManyAnonObjects()
	}
	transfer := transferBasic
	if len(req.Transfers) == 1 && req.Transfers[0] == transferSSH {
		transfer = transferSSH
	}
	return transfer, nil
}

// checkObject validates one object of a request: a refusal the client
// sees in that object's error (422 for a bad id or size, 413 for an upload
// over the limit), or nil.
func checkObject(op string, o objectSpec, l Limits) *objectError {
	switch {
	case !repo.ValidLFSOID(o.OID):
		return &objectError{Code: http.StatusUnprocessableEntity, Message: "invalid object id: want 64 lowercase hex digits (SHA-256)"}
	case o.Size < 0:
		return &objectError{Code: http.StatusUnprocessableEntity, Message: "invalid object size"}
	case op == opUpload && o.Size > l.MaxObjectSize:
		return &objectError{Code: http.StatusRequestEntityTooLarge, Message: l.objectTooLarge().Error()}
	}
	return nil
}

// actionsFor is the decision after a valid object's presence is known:
// which actions the answer gives it, or its error.
//
//	operation  present   answer
//	download   yes       download
//	download   no        404 object not found
//	upload     yes       nothing (the client skips it)
//	upload     no        upload, verify
func actionsFor(op string, present bool) ([]string, *objectError) {
	switch {
	case op == opDownload && present:
		return []string{opDownload}, nil
	case op == opDownload:
		return nil, &objectError{Code: http.StatusNotFound, Message: "object not found"}
	case present:
		return nil, nil
	}
	return []string{opUpload, opVerify}, nil
}
