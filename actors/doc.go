// Package actors is rgit's actor system (protoactor-go): the node
// supervisor, one repo actor per open repository, and the leader actor that
// writes the ownership map. Actors are thin shells doing I/O around the pure
// decisions in cluster/ and the storage layer; byte streams never pass
// through a mailbox. It may import cluster/ and storage/.
package actors
