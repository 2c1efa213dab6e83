// Package gitproto holds git's wire protocol state machines: upload-pack
// (protocol v2 and v0/v1) and receive-pack, independent of the transport.
//
// Front ends (smart HTTP in stateless-RPC mode, SSH in full-duplex mode)
// call UploadPack or ReceivePack with the request body or channel as in and
// the response as out; the repository is reached only through the Backend
// interface, which the storage side implements.
//
// Imports: the standard library, storage/object and transport/wire/pktline.
// Nothing here knows about actors, HTTP or SSH.
package gitproto
