// Package node assembles a running rgit node from its configuration, and
// the read-API tier in front of a cluster.
//
//   - Start (serve.go) builds a node in small steps, each handing the next
//     what it built (a wiring): bind every port; openStore (open and
//     verify the object store); openLocal (pack cache, metrics registry,
//     memory budget, peer secret, credentials, the read API's Redis
//     cache); startActors (cluster wiring, name-index migration,
//     admission, the actor system); buildEngine (the git engine, one
//     protocol engine, the node's one gitserve.Gate, counted forwarders);
//     buildFrontEnds (HTTP, SSH, admin, then singleFrontEnds or
//     clusterFrontEnds: the only place the two modes differ in what they
//     serve); serve. Nothing is served until every step has succeeded, and
//     nothing is written before every port is bound.
//   - Server.Shutdown drains (lifecycle.go: traffic state, joining,
//     prewarming what placement moves here, hints to successors).
//   - StartAPI (apiserve.go) is `rgit api-serve`: the read API and the
//     web page over a cluster's peer service.
//   - config (RGIT_* parsing and validation) and version (the build's
//     identity) are its sub-packages.
//
// It is the top of the house: it may import everything below it
// (transport, actors, cluster, storage). Nothing imports it but cmd/
// (rgit and the benchmarks), testkit and tests; config is also read by
// deploy's manifest test. Its end-to-end tests start nodes in process
// through testkit/gitenv.
package node
