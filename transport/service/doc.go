// Package service is the room of the git service every front end shares:
// gitserve (the gate that authorizes, admits and routes one session),
// engine (the protocol bound to stored repositories through the actors),
// fetchpack (the pack-producing half of upload-pack) and admission (the
// node's memory and work budget). Packages here import transport/wire
// and nothing else under transport/.
package service
