// Package admin is the operator channel of a running node: rgit-admin sends
// a command over the node's peer stream port, authenticated by the peer
// secret, and the node executes it through the owning repo actor, so
// nothing has to be stopped and no second writer is ever opened.
//
// Wire format: POST /admin/v1 with a JSON Request and the secret as a bearer
// token; the answer streams newline-delimited JSON Events (progress lines,
// then exactly one result or error). This package may import actors/ and
// storage/.
package admin

import "encoding/json"

// Request is one admin command.
type Request struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Body carries file contents a command needs (add-key's public key).
	Body string `json:"body,omitempty"`
}

// Event is one line of the streamed answer.
type Event struct {
	Progress string `json:"progress,omitempty"`
	Output   string `json:"output,omitempty"`
	// Data is the typed result of commands that have one (listings and
	// access changes: Repos, Status, Where, AccessList, TokenList, …), as
	// JSON: what `rgit-admin --json` prints.
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
	// Code classifies Error (CodeNotFound, …) for exit statuses.
	Code string `json:"code,omitempty"`
	Done bool   `json:"done,omitempty"`
}

// Path is the HTTP path of the admin endpoint.
const Path = "/admin/v1"
