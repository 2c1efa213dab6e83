package lfs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/auth"
)

// Ticket operations: what a ticket lets its bearer do.
const (
	opDownload = "download" // GET one object (node-served)
	opUpload   = "upload"   // PUT one object (node-served)
	opVerify   = "verify"   // POST verify of one object
	opAuth     = "auth"     // call the batch and lock endpoints as ID
)

// ticket is a node's signed statement of what its bearer may do, until
// Exp, with one repository (canonical spelling). Object tickets name the
// object and its size; auth tickets (git-lfs-authenticate's header, and
// the SSH transfer's own calls) carry the identity the SSH key
// authenticated, already narrowed to the repository and the operation.
type ticket struct {
	Op    string         `json:"op"`
	Owner string         `json:"o"`
	Name  string         `json:"n"`
	OID   string         `json:"oid,omitempty"`
	Size  int64          `json:"sz,omitempty"`
	Exp   int64          `json:"exp"`
	ID    *auth.Identity `json:"id,omitempty"`
	// Anon: handed to a caller without credentials; its transfer holds a
	// unit of the per-address cap while it runs.
	Anon bool `json:"a,omitempty"`
}

// maxTicket bounds what open decodes.
const maxTicket = 4096

var errBadTicket = errors.New("invalid or expired link")

// signer signs and opens tickets with a key derived from the peer secret:
// every node of a cluster shares it, so a ticket one node handed out is
// good on any other (node-served transfers on a shared file store).
type signer struct{ key []byte }

func newSigner(secret string) signer {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("rgit git-lfs ticket v1"))
	return signer{key: m.Sum(nil)}
}

func (s signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// sign encodes t as base64url(JSON).base64url(HMAC).
func (s signer) sign(t ticket) string {
	b, _ := json.Marshal(t) // cannot fail: plain fields only
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

// open checks tok's signature (in constant time) and expiry at now.
func (s signer) open(tok string, now time.Time) (ticket, error) {
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > maxTicket {
		return ticket{}, errBadTicket
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return ticket{}, errBadTicket
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return ticket{}, errBadTicket
	}
	var t ticket
	if err := json.Unmarshal(b, &t); err != nil {
		return ticket{}, fmt.Errorf("%w: %w", errBadTicket, err)
	}
	if now.Unix() >= t.Exp {
		return ticket{}, errBadTicket
	}
	return t, nil
}
