// Package transport holds everything between a client's bytes and the
// actors, in rooms by role. Arrows point down the list, never up:
//
//   - transport/wire: the protocols as bytes and rules — pkt-line,
//     git's upload-pack and receive-pack state machines (gitproto), peer
//     TLS, request ids, per-client limits. Imports nothing else in
//     transport.
//   - transport/service: the git service a session runs — the gate that
//     admits and routes a session (gitserve), the engine that binds the
//     protocol to stored repositories, the pack-producing half of
//     upload-pack (fetchpack), memory admission. Imports wire.
//   - transport/frontend: the listeners clients and peers speak to —
//     smart HTTP (httpgit), SSH (sshgit), the peer ports (peer). Each
//     hands a session to the service's gate. Imports service and wire.
//   - transport/product: the surfaces around git — the read API, the web
//     page, the admin channel, Git LFS, webhooks. Imports the rooms above
//     and each other.
//   - transport/node: assembles a node from its configuration; imported
//     only by cmd/ and tests.
//
// Every room may import actors/, cluster/ and storage/; nothing there
// imports transport. transport/node's TestImportDirection keeps the
// arrows.
package transport
