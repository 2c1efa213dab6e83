// Package config reads rgit's configuration from RGIT_* environment
// variables (DESIGN.md §9). Bad values fail at start with an error naming
// the variable. It imports the standard library, cluster/ (pure name
// parsing) and transport/wire/peertls (loading the peer certificates).
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// Config is the whole server configuration.
type Config struct {
	StoreURL        string            // RGIT_STORE_URL
	StoreTimeout    time.Duration     // RGIT_STORE_TIMEOUT_SECS
	StoreOpTimeout  time.Duration     // RGIT_STORE_OP_TIMEOUT_MS
	CacheDir        string            // RGIT_CACHE_DIR
	HTTPAddr        string            // RGIT_HTTP_ADDR
	SSHAddr         string            // RGIT_SSH_ADDR
	HostKey         string            // RGIT_HOST_KEY
	PeerAddr        string            // RGIT_PEER_ADDR; the peer stream port is this port + 1
	PeerSvc         string            // RGIT_PEER_SVC
	Peers           map[string]string // RGIT_PEERS: node → peer HTTP address; nil unless set
	Self            string            // RGIT_SELF
	PeerSecret      string            // RGIT_PEER_SECRET
	FlushInterval   time.Duration     // RGIT_FLUSH_INTERVAL_MS
	WarmTTL         time.Duration     // RGIT_WARM_TTL_SECS
	MaxWarm         int               // RGIT_MAX_WARM
	MaxOpenPacks    int               // RGIT_MAX_OPEN_PACKS; 0: derived (admission.Limits.OpenPacks)
	MaintSlots      int               // RGIT_MAINTENANCE_SLOTS; 0: automatic maintenance off
	MaintInterval   time.Duration     // RGIT_MAINTENANCE_INTERVAL_SECS; 0: no scheduled pass
	MaxBody         int64             // RGIT_MAX_BODY
	FsckSkip        string            // RGIT_FSCK_SKIP
	FsckStrict      bool              // RGIT_FSCK_STRICT
	ClonePackCache  int64             // RGIT_CLONE_CACHE_BYTES
	PackURIs        string            // RGIT_PACK_URIS: auto, on or off (see PackURIsOn)
	PackURITTL      time.Duration     // RGIT_PACK_URI_SECS
	PackURIMinBytes int64             // RGIT_PACK_URI_MIN_BYTES
	PackURIBase     string            // RGIT_PACK_URI_BASE: scheme://host[:port][/prefix], or ""
	LogLevel        string            // RGIT_LOG_LEVEL
	DrainTimeout    time.Duration     // RGIT_DRAIN_SECS
	LeaderWait      time.Duration     // RGIT_LEADER_WAIT_SECS
	StoreGrace      time.Duration     // RGIT_LEASE_STORE_GRACE_SECS
	Rebalance       bool              // RGIT_REBALANCE
	RebalanceMoves  int               // RGIT_REBALANCE_MOVES
	MaxPushRefs     int               // RGIT_MAX_PUSH_REFS
	MaxPushOptions  int               // RGIT_MAX_PUSH_OPTIONS
	MaxObjectSize   int64             // RGIT_MAX_OBJECT_SIZE
	MaxPackSize     int64             // RGIT_MAX_PACK_SIZE
	MaxDeltaDepth   int               // RGIT_MAX_DELTA_DEPTH
	MaxWants        int               // RGIT_MAX_WANTS
	MaxHaves        int               // RGIT_MAX_HAVES
	MaxArgBytes     int               // RGIT_MAX_ARG_BYTES
	MaxNegotiations int               // RGIT_MAX_NEGOTIATIONS
	NegotiationWait time.Duration     // RGIT_NEGOTIATION_WAIT_SECS
	RequestTimeout  time.Duration     // RGIT_REQUEST_SECS
	MinRate         int64             // RGIT_MIN_RATE in bytes per second; 0: the stall times alone
	MaxAnonPerAddr  int               // RGIT_MAX_ANON_PER_ADDR; 0: no limit
	SSHAuth         time.Duration     // RGIT_SSH_AUTH_SECS
	PeerAddrSet     bool              // RGIT_PEER_ADDR was set rather than defaulted
	HTTPIdle        time.Duration     // RGIT_HTTP_IDLE_SECS
	HTTPBodyStall   time.Duration     // RGIT_HTTP_BODY_STALL_SECS
	SSHIdle         time.Duration     // RGIT_SSH_IDLE_SECS
	SSHStall        time.Duration     // RGIT_SSH_STALL_SECS
	LogFormat       string            // RGIT_LOG_FORMAT: auto, json or console; see LogEncoding
	MemoryLimit     int64             // RGIT_MEMORY_LIMIT in bytes; 0: the cgroup limit alone
	PrewarmBytes    int64             // RGIT_PREWARM_BYTES: start-up prewarm budget; 0: none
	GCInterval      time.Duration     // RGIT_GC_INTERVAL_SECS; 0 disables automatic GC
	RedisURL        string            // RGIT_REDIS_URL; "" disables the read API cache
	Upstream        string            // RGIT_UPSTREAM (api-serve)
	APIAddr         string            // RGIT_API_ADDR (api-serve)
	HookAllow       []netip.Prefix    // RGIT_HOOK_ALLOW: non-public ranges webhooks may reach
	HookRetry       time.Duration     // RGIT_HOOK_RETRY_SECS
	HookTimeout     time.Duration     // RGIT_HOOK_TIMEOUT_SECS
	HookBackoff     time.Duration     // RGIT_HOOK_BACKOFF_MS: the first retry's wait
	HookConcurrency int               // RGIT_HOOK_CONCURRENCY
	HookSweep       time.Duration     // RGIT_HOOK_SWEEP_SECS
	// The read API's limits per answer (transport/product/api.Limits).
	APIMaxEntries         int           // RGIT_API_MAX_ENTRIES
	APIMaxDiffFiles       int           // RGIT_API_MAX_DIFF_FILES
	APIMaxDiffBytes       int64         // RGIT_API_MAX_DIFF_BYTES
	APIMaxDiffFileBytes   int64         // RGIT_API_MAX_DIFF_FILE_BYTES
	APIDiffTimeout        time.Duration // RGIT_API_DIFF_TIMEOUT_MS
	APIRenameLimit        int           // RGIT_API_RENAME_LIMIT
	APIMaxLogScan         int           // RGIT_API_MAX_LOG_SCAN
	APIMaxArchiveBytes    int64         // RGIT_API_MAX_ARCHIVE_BYTES
	APIMaxActive          int           // RGIT_API_MAX_ACTIVE; 0: derived from the CPUs
	APIMaxBlameCommits    int           // RGIT_API_MAX_BLAME_COMMITS
	APIBlameTimeout       time.Duration // RGIT_API_BLAME_TIMEOUT_MS
	APIMaxBlameFileBytes  int64         // RGIT_API_MAX_BLAME_FILE_BYTES
	LFSMaxObject          int64         // RGIT_LFS_MAX_OBJECT_SIZE
	LFSMaxBatch           int           // RGIT_LFS_MAX_BATCH_OBJECTS
	LFSMaxBatchBody       int64         // RGIT_LFS_MAX_BATCH_BYTES
	APISearchMaxBytes     int64         // RGIT_API_SEARCH_MAX_BYTES
	APISearchMaxFiles     int           // RGIT_API_SEARCH_MAX_FILES
	APISearchMaxBlobs     int           // RGIT_API_SEARCH_MAX_BLOBS
	APISearchTimeout      time.Duration // RGIT_API_SEARCH_TIMEOUT_MS
	APISearchMaxFileBytes int64         // RGIT_API_SEARCH_MAX_FILE_BYTES
	APILastCommitScan     int           // RGIT_API_LAST_COMMIT_SCAN
	APILastCommitTimeout  time.Duration // RGIT_API_LAST_COMMIT_TIMEOUT_MS
	LFSMaxAnonBatch       int           // RGIT_LFS_MAX_ANON_BATCH_OBJECTS
	// PeerTLS is the peer ports' mutual TLS loaded from RGIT_PEER_TLS_CERT,
	// RGIT_PEER_TLS_KEY and RGIT_PEER_TLS_CA; nil when none is set.
	PeerTLS *peertls.Config
	// MetricsAddr is RGIT_METRICS_ADDR: /metrics on a listener of its own;
	// "" serves it on the node's internal port (see InternalMetrics).
	MetricsAddr string
	// PublicURL (RGIT_PUBLIC_URL), PublicSSHURL (RGIT_PUBLIC_SSH_URL) and
	// WebURL (RGIT_WEB_URL) are the addresses people use, without a
	// trailing slash; "" when unset.
	PublicURL, PublicSSHURL, WebURL string
}

// Var documents one variable; the README's configuration table is kept in
// step with this list by a test.
type Var struct {
	Name, Default, Help string
}

// Vars lists every variable `rgit serve` reads.
var Vars = []Var{
	{"RGIT_STORE_URL", "file://./data", "object store: file:///abs/dir, file://./rel, s3://bucket[/prefix], mem:// (tests; nothing persists)"},
	{"RGIT_STORE_TIMEOUT_SECS", "900", "per-request object store timeout"},
	{"RGIT_STORE_OP_TIMEOUT_MS", "10000", "longest one object-store request may wait on the store: for its answer, the next chunk of a download, or between two parts of an upload (16 MiB on S3); past it the request fails as \"object store unavailable\" (a push gets an ng line naming the store); at most RGIT_STORE_TIMEOUT_SECS"},
	{"RGIT_CACHE_DIR", "./cache", "local pack cache; locked by one process at a time"},
	{"RGIT_HTTP_ADDR", ":8080", "smart HTTP listen address (also the web page on a single node, /healthz, /ready)"},
	{"RGIT_SSH_ADDR", ":2222", "SSH listen address"},
	{"RGIT_HOST_KEY", "./host_key", "SSH host key (OpenSSH format); generated if missing, its public half written beside it with .pub appended; one key for every node of a cluster"},
	{"RGIT_PEER_ADDR", ":8081", "peer HTTP listen address; the peer stream port (admin, actor messages) is this port + 1, on 127.0.0.1 on a single node unless this is set"},
	{"RGIT_PEER_SVC", "", "headless service the peers hang off; unset means single node"},
	{"RGIT_PEERS", "", "static peer map instead of RGIT_PEER_SVC: rgit-0=127.0.0.1:9081,rgit-1=127.0.0.1:9181 (peer HTTP addresses; stream port = +1)"},
	{"RGIT_SELF", "", "this node's stable name (rgit-2); required in cluster mode (RGIT_PEER_SVC or RGIT_PEERS)"},
	{"RGIT_PEER_SECRET", "", "shared secret of the peer ports (at least 16 characters); required in cluster mode, generated into the cache dir on a single node if unset"},
	{peertls.EnvCert, "", "PEM certificate this node presents on the peer ports, signed by RGIT_PEER_TLS_CA; with the key and CA it turns on mutual TLS on both peer ports"},
	{peertls.EnvKey, "", "PEM private key of RGIT_PEER_TLS_CERT"},
	{peertls.EnvCA, "", "PEM CA certificate; peers (and rgit-admin) whose certificate it did not sign are refused"},
	{"RGIT_FLUSH_INTERVAL_MS", "0", "minimum batching delay of ref-database writes"},
	{"RGIT_WARM_TTL_SECS", "300", "idle time before a repository's database is closed"},
	{"RGIT_MAX_WARM", "64", "maximum number of open repository databases"},
	{"RGIT_MAX_OPEN_PACKS", "0", "node-wide budget of open pack files: beyond it the least recently used are closed and reopened on their next read, and the packs of repositories no longer open are kept within a quarter of it; 0: a quarter of RLIMIT_NOFILE, at most 20% of the memory budget at 2 MiB a pack (at least 16)"},
	{"RGIT_MAINTENANCE_SLOTS", "1", "background pack maintenance jobs (roll-ups, full repacks) running at once on the node; 0 turns automatic maintenance off"},
	{"RGIT_MAINTENANCE_INTERVAL_SECS", "3600", "mean interval of the scheduled maintenance pass over the node's warm repositories (jittered ±25%); 0: only after pushes"},
	{"RGIT_MAX_BODY", "2147483648", "maximum HTTP request body in bytes, enforced before authentication"},
	{"RGIT_CLONE_CACHE_BYTES", "1073741824", "disk budget for cached clone packs (one per ref state); 0 disables"},
	{"RGIT_PACK_URIS", "auto", "protocol v2 clones and fetches download stored packs (the largest on a clone, other large ones they need) straight from the object store through a presigned URL (packfile-uris; clients opt in with fetch.uriprotocols); auto: on when the store can presign (S3), off on file:// and mem://; 1: on (refused at start on a store that cannot presign); 0: off"},
	{"RGIT_PACK_URI_SECS", "600", "validity of a pack URL handed to a clone: the client must start its download within this long"},
	{"RGIT_PACK_URI_MIN_BYTES", "1048576", "least a stored pack must save the node to be sent by URI (bytes the fetch needs from it; Ki, Mi, Gi suffixes); a full clone's base pack is exempt"},
	{"RGIT_PACK_URI_BASE", "", "base URL of a CDN or proxy in front of the store, http(s)://host[:port][/prefix]: pack URLs keep their path and signed query and get this scheme, host and prefix; the proxy forwards path and query untouched to the store with the store's Host header"},
	{"RGIT_FSCK_SKIP", "", "comma-separated fsck checks to skip, e.g. gitmodulesParse (security checks cannot be skipped)"},
	{"RGIT_FSCK_STRICT", "0", "1: also reject cosmetic fsck findings (zero-padded modes, bad dates and identities) that are accepted and logged by default"},
	{"RGIT_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"RGIT_LOG_FORMAT", "auto", "json or console; auto: console when stderr is a terminal, json otherwise"},
	{"RGIT_DRAIN_SECS", "25", "how long SIGTERM waits for in-flight requests and SSH sessions"},
	{"RGIT_LEADER_WAIT_SECS", "30", "cluster: how long a request that needs the ownership leader (a repository nobody holds, or one whose owner died) waits for an unreachable leader, such as one restarting, before answering 503; it holds only its connection meanwhile; 0: answer at once"},
	{"RGIT_LEASE_STORE_GRACE_SECS", "60", "cluster (the leader's setting): how long after its last write to the store the ownership leader still acknowledges the nodes' session renewals when the store fails or hangs, so that warm repositories keep being served through a store outage that long (cold ones and pushes fail as without it); a leader restarted after such an outage holds the repositories of nodes live before it up to this long plus the 10 s lease before moving them; 0: renewals need a write, warm reads on a cluster stop after 10 s of outage"},
	{"RGIT_REBALANCE", "1", "cluster (the leader's setting): move warm repositories toward their rendezvous placement among the live nodes, so that nodes that join take a share of the load (each move prewarms the new owner, releases the repository through the holder's drain, then hands it over); 0: only repositories claimed cold are placed"},
	{"RGIT_REBALANCE_MOVES", "4", "cluster (the leader's setting): the rebalancer's pace, repositories being moved at once (a move waits for the new owner's heartbeat, then the holder's, then a drain: up to about 7 s); a repository moved stays put for 2 minutes"},
	{"RGIT_MAX_PUSH_REFS", "100000", "maximum ref updates of one push (a mirror push sends one per ref)"},
	{"RGIT_MAX_PUSH_OPTIONS", "32", "maximum push options (git push -o) of one push"},
	{"RGIT_MAX_OBJECT_SIZE", "104857600", "maximum size in bytes of one pushed object, inflated (a delta's declared result is checked before it is applied); larger files go in Git LFS, which the refusal explains; 0: no limit"},
	{"RGIT_MAX_PACK_SIZE", "2147483648", "maximum bytes of one pushed pack, over HTTP and SSH alike; 0: no limit"},
	{"RGIT_MAX_DELTA_DEPTH", "10000", "maximum delta chain length in a pushed pack (git writes at most 50 by default)"},
	{"RGIT_MAX_WANTS", "200000", "maximum distinct wants of one fetch request (git sends one per distinct ref tip fetched)"},
	{"RGIT_MAX_HAVES", "200000", "maximum distinct haves of one fetch negotiation (a v2 request, a v0 HTTP request or a whole v0 SSH session); git sends a few thousand when it finds common history"},
	{"RGIT_MAX_ARG_BYTES", "33554432", "maximum bytes of one fetch request's argument lines"},
	{"RGIT_MAX_NEGOTIATIONS", "16", "maximum fetch negotiations (have matching and reachability checks, once the request has arrived) running at once on the node; more queue"},
	{"RGIT_NEGOTIATION_WAIT_SECS", "10", "how long a fetch request queues for a negotiation slot before it is refused as busy (ERR server busy, HTTP 503)"},
	{"RGIT_REQUEST_SECS", "60", "a whole fetch request (a protocol v2 command with its arguments, a v0 want list or round of haves) must arrive within this long of the server waiting for it"},
	{"RGIT_MIN_RATE", "4096", "minimum bytes per second of request bodies, SSH input and answers the client reads; a transfer may fall behind it by the stall time (RGIT_HTTP_BODY_STALL_SECS, RGIT_SSH_STALL_SECS); 0: the stall times alone"},
	{"RGIT_MAX_ANON_PER_ADDR", "32", "unauthenticated connections and requests one client address may have open at once (HTTP git requests without credentials, SSH connections until they authenticate with a registered key); 0: no limit"},
	{"RGIT_HTTP_IDLE_SECS", "120", "an idle keep-alive HTTP connection is closed after this long (every HTTP listener)"},
	{"RGIT_HTTP_BODY_STALL_SECS", "60", "how far a request body or an answer may fall behind RGIT_MIN_RATE (a body that stops moving is cut off after this long; every HTTP listener)"},
	{"RGIT_SSH_IDLE_SECS", "300", "an SSH connection that moves no data for this long is closed"},
	{"RGIT_SSH_STALL_SECS", "60", "how far an SSH session's input (while the server waits for it) or output may fall behind RGIT_MIN_RATE"},
	{"RGIT_SSH_AUTH_SECS", "30", "an SSH connection must finish authenticating within this long of connecting"},
	{"RGIT_MEMORY_LIMIT", "0", "memory budget in bytes (suffixes Ki, Mi, Gi); the cgroup limit (memory.max) applies when lower; 0: the cgroup limit alone"},
	{"RGIT_PREWARM_BYTES", "1Gi", "cluster: bytes of packs a starting node fetches into its cache, before it reports ready, for the repositories placement steers to it (suffixes Ki, Mi, Gi); 0: no start-up prewarm"},
	{"RGIT_GC_INTERVAL_SECS", "3600", "average time between automatic garbage collections of each repository this node owns (jittered); 0 disables"},
	{"RGIT_REDIS_URL", "", "read API cache: redis://[:password@]host:port[/db] or rediss:// (TLS); set it on the git nodes and on api-serve alike (nodes invalidate); Redis must run maxmemory-policy volatile-lru; unset: no cache"},
	{"RGIT_UPSTREAM", "http://rgit:8081", "api-serve only: base URL of the git fleet's peer HTTP service (not the public port)"},
	{"RGIT_API_ADDR", ":8090", "api-serve only: read API listen address"},
	{"RGIT_METRICS_ADDR", "", "listen address of /metrics (Prometheus), e.g. :9100; unset: on the node's internal port, the peer HTTP port in a cluster and the admin port (127.0.0.1:8082) on a single node; never on the public port (api-serve, which has only a public port, serves /metrics only here)"},
	{"RGIT_PUBLIC_URL", "", "public base URL of git over HTTP, e.g. https://git.example.com (the load balancer or TLS proxy in front of the nodes): the web page's HTTP clone URLs and the links Git LFS hands out (node-served transfers, git-lfs-authenticate's answer); on a single node also the page's own URL (see RGIT_WEB_URL); unset: the page uses the address the browser used (single node) or shows no HTTP clone URL (api-serve), and Git LFS the request's own Host (over SSH the address the client connected to, with the HTTP port)"},
	{"RGIT_PUBLIC_SSH_URL", "", "public base URL of git over SSH, e.g. ssh://git@git.example.com:2222: the web page's SSH clone URLs; unset: the browser's host and the node's SSH port (single node) or none (api-serve)"},
	{"RGIT_WEB_URL", "", "public URL of the web page, e.g. https://code.example.com (api-serve in a cluster); https marks the sign-in cookie Secure behind a TLS proxy; a cluster node's public / and /owner/name redirect there; unset: RGIT_PUBLIC_URL on a single node"},
	{"RGIT_API_MAX_ENTRIES", "500000", "read API: tree entries one answer may visit (listed, searched, diffed, archived); an archive or tree listing over it is refused (422)"},
	{"RGIT_API_MAX_DIFF_FILES", "3000", "read API: changed files a commit or compare diff lists; more are cut (truncated)"},
	{"RGIT_API_MAX_DIFF_BYTES", "4Mi", "read API: bytes of a diff's text (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_MAX_DIFF_FILE_BYTES", "1Mi", "read API: a file larger than this is not line-diffed but shown as binary (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_DIFF_TIMEOUT_MS", "3000", "read API: time one answer may spend on line diffs; later files are listed without lines (truncated)"},
	{"RGIT_API_RENAME_LIMIT", "1000", "read API: as git's diff.renameLimit: with more added or deleted files, renames are found only for identical content"},
	{"RGIT_API_MAX_LOG_SCAN", "10000", "read API: commits a log with a path filter examines for one page; the page then ends early with its Link next"},
	{"RGIT_API_MAX_BLAME_COMMITS", "20000", "read API: commits one blame examines; the lines left are the oldest commit's reached (truncated)"},
	{"RGIT_API_BLAME_TIMEOUT_MS", "5000", "read API: time one blame may take; the lines left are the oldest commit's reached (truncated)"},
	{"RGIT_API_MAX_BLAME_FILE_BYTES", "1Mi", "read API: a larger file is not blamed (422); an older version this large stops the blame (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_MAX_ARCHIVE_BYTES", "2Gi", "read API: file bytes of one archive; a larger one is refused (422) before its first byte (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_MAX_ACTIVE", "0", "read API: expensive answers (archives, diffs, logs with a path, searches) computed at once on the node; more wait up to 2 s, then get 503; 0: four times the CPUs, at least 8"},
	{"RGIT_API_SEARCH_MAX_BYTES", "64Mi", "read API: file content one search page scans; the page then stops early, saying where (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_SEARCH_MAX_FILES", "20000", "read API: files one search page looks at; the page then stops early, saying where"},
	{"RGIT_API_SEARCH_MAX_BLOBS", "10000", "read API: files one search page reads; the page then stops early, saying where"},
	{"RGIT_API_SEARCH_TIMEOUT_MS", "2000", "read API: time one search page may take; the page then stops early, saying where, and is not cached"},
	{"RGIT_API_SEARCH_MAX_FILE_BYTES", "1Mi", "read API: files larger than this are skipped (and counted) by search (suffixes Ki, Mi, Gi)"},
	{"RGIT_API_LAST_COMMIT_SCAN", "10000", "read API: commits one lastcommit walk (a directory's last commit per entry) examines; entries not found by then come back without a commit (truncated)"},
	{"RGIT_API_LAST_COMMIT_TIMEOUT_MS", "2000", "read API: time one lastcommit walk may take (a request may ask for less with timeout_ms); entries not found by then come back without a commit, and the answer is not cached"},
	{"RGIT_API_MAX_ACTIVE", "0", "read API: expensive answers (archives, diffs, logs with a path) computed at once on the node; more wait up to 2 s, then get 503; 0: four times the CPUs, at least 8"},
	{"RGIT_HOOK_ALLOW", "", "webhooks: comma-separated CIDR prefixes or addresses of non-public ranges deliveries may go to (loopback, private, link-local and other non-public addresses are refused otherwise)"},
	{"RGIT_HOOK_RETRY_SECS", "28800", "webhooks: how long a failing delivery is retried, from when its event was queued, before it is given up"},
	{"RGIT_HOOK_TIMEOUT_SECS", "10", "webhooks: bound on one delivery attempt, connecting to reading the answer (connecting alone: at most 5 s)"},
	{"RGIT_HOOK_BACKOFF_MS", "10000", "webhooks: wait before the first retry; each further retry waits twice as long, at most 10 minutes, jittered"},
	{"RGIT_HOOK_CONCURRENCY", "16", "webhooks: deliveries in flight at once on the node"},
	{"RGIT_HOOK_SWEEP_SECS", "30", "webhooks: how often (jittered) a node looks for repositories with deliveries waiting that nobody is sending (their owner crashed or drained, and nothing opened them since) and opens them"},
	{"RGIT_LFS_MAX_OBJECT_SIZE", "5Gi", "largest Git LFS object an upload may declare, in bytes (suffixes Ki, Mi, Gi); 5 GiB is the most S3 takes in one PUT"},
	{"RGIT_LFS_MAX_BATCH_OBJECTS", "1000", "objects in one Git LFS batch request (git-lfs sends 100 at a time)"},
	{"RGIT_LFS_MAX_ANON_BATCH_OBJECTS", "100", "objects in one Git LFS batch request without credentials; each costs a store lookup"},
	{"RGIT_LFS_MAX_BATCH_BYTES", "1Mi", "bytes of one Git LFS batch request's body, read before it is parsed (suffixes Ki, Mi, Gi)"},
}

// Elsewhere lists the RGIT_* variables that other rgit programs read from
// the same environment, which a node accepts and ignores: rgit-admin's,
// which a node's container may set for `kubectl exec … rgit-admin`, and
// those of the test and benchmark harness, whose nodes inherit the
// environment `make test` exports. TestEveryVariableIsKnown finds any
// RGIT_* name in the code that is neither read by Parse nor listed here.
var Elsewhere = []string{
	"RGIT_ADMIN_ADDR",
	"RGIT_BENCH_BITMAP", "RGIT_BENCH_DIR", "RGIT_BENCH_PACK", "RGIT_BENCH_REPO", "RGIT_CAPACITY_MOVES", "RGIT_CAPACITY_NODES", "RGIT_CAPACITY_REPOS", "RGIT_CLUSTER_FIRST_SEED", "RGIT_CLUSTER_REPLAY_SEEDS", "RGIT_CLUSTER_SEED", "RGIT_CLUSTER_SEEDS", "RGIT_E2E_BIG",
	"RGIT_FILESTORE_CHILD_DIR", "RGIT_HELPER", "RGIT_HELPER_BUSY", "RGIT_MULTIPROC_KILLS", "RGIT_MULTIPROC_OPS", "RGIT_MULTIPROC_ROUNDS",
	"RGIT_PLACEMENT_REPOS", "RGIT_REQUIRE_ALL", "RGIT_REWRITE", "RGIT_SCREENSHOTS", "RGIT_STORETEST_BIG_MB",
	"RGIT_TEST_SCALE", "RGIT_VERSITYGW",
}

// FromEnv reads the configuration from the process environment
// (FromEnviron).
func FromEnv() (*Config, error) { return FromEnviron(os.Environ()) }

// FromEnviron reads the configuration from environ ("KEY=value" entries,
// as os.Environ returns them) and also refuses every RGIT_* variable that
// neither Parse nor another rgit program (Elsewhere) reads: a mistyped
// name (RGIT_HTTPADDR) would otherwise leave its setting at the default
// without a word. Which variables Parse reads is recorded as it reads
// them, so a variable added to Parse is known without being listed again.
func FromEnviron(environ []string) (*Config, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	read := map[string]bool{}
	c, err := Parse(func(k string) string { read[k] = true; return env[k] })
	var unknown []error
	for _, k := range Elsewhere {
		read[k] = true // a typo of one gets it suggested too
	}
	for k := range env {
		if strings.HasPrefix(k, "RGIT_") && !read[k] {
			unknown = append(unknown, unknownVar(k, read))
		}
	}
	if unknown == nil {
		return c, err
	}
	slices.SortFunc(unknown, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return nil, errors.Join(append(unknown, err)...)
}

// unknownVar is the error for an RGIT_* variable nothing reads, naming
// the closest known one when it looks like a typo of it: a few edits
// away, or the known name with a part left off (RGIT_STORE for
// RGIT_STORE_URL).
func unknownVar(name string, known map[string]bool) error {
	best, dist := "", -1
	for k := range known {
		d := editDistance(name, k)
		if d > 1+len(strings.TrimPrefix(name, "RGIT_"))/3 && !strings.HasPrefix(k, name+"_") {
			continue
		}
		if dist < 0 || d < dist || (d == dist && k < best) {
			best, dist = k, d
		}
	}
	if best != "" {
		return fmt.Errorf("%s: unknown variable; did you mean %s?", name, best)
	}
	return fmt.Errorf("%s: unknown variable (`rgit` without arguments lists them)", name)
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Parse reads the configuration through getenv (tests pass a map lookup).
func Parse(getenv func(string) string) (*Config, error) {
	p := parser{getenv: getenv}
	c := &Config{
		StoreURL:        p.str("RGIT_STORE_URL"),
		StoreTimeout:    p.seconds("RGIT_STORE_TIMEOUT_SECS", 1),
		StoreOpTimeout:  time.Duration(p.int("RGIT_STORE_OP_TIMEOUT_MS", 100)) * time.Millisecond,
		CacheDir:        p.str("RGIT_CACHE_DIR"),
		HTTPAddr:        p.addr("RGIT_HTTP_ADDR"),
		SSHAddr:         p.addr("RGIT_SSH_ADDR"),
		HostKey:         p.str("RGIT_HOST_KEY"),
		PeerAddr:        p.addr("RGIT_PEER_ADDR"),
		PeerSvc:         p.str("RGIT_PEER_SVC"),
		Self:            p.str("RGIT_SELF"),
		PeerSecret:      p.str("RGIT_PEER_SECRET"),
		FlushInterval:   time.Duration(p.int("RGIT_FLUSH_INTERVAL_MS", 0)) * time.Millisecond,
		WarmTTL:         p.seconds("RGIT_WARM_TTL_SECS", 1),
		MaxWarm:         int(p.int("RGIT_MAX_WARM", 1)),
		MaxOpenPacks:    int(p.int("RGIT_MAX_OPEN_PACKS", 0)),
		MaintSlots:      int(p.int("RGIT_MAINTENANCE_SLOTS", 0)),
		MaintInterval:   p.seconds("RGIT_MAINTENANCE_INTERVAL_SECS", 0),
		MaxBody:         p.int("RGIT_MAX_BODY", 1),
		FsckSkip:        p.str("RGIT_FSCK_SKIP"),
		FsckStrict:      p.bool("RGIT_FSCK_STRICT"),
		ClonePackCache:  p.int("RGIT_CLONE_CACHE_BYTES", 0),
		PackURIs:        p.autoBool("RGIT_PACK_URIS"),
		PackURITTL:      p.seconds("RGIT_PACK_URI_SECS", 1),
		PackURIMinBytes: p.bytes("RGIT_PACK_URI_MIN_BYTES"),
		LogLevel:        p.oneOf("RGIT_LOG_LEVEL", "debug", "info", "warn", "error"),
		DrainTimeout:    p.seconds("RGIT_DRAIN_SECS", 0),
		LeaderWait:      p.seconds("RGIT_LEADER_WAIT_SECS", 0),
		StoreGrace:      p.seconds("RGIT_LEASE_STORE_GRACE_SECS", 0),
		Rebalance:       p.bool("RGIT_REBALANCE"),
		RebalanceMoves:  int(p.int("RGIT_REBALANCE_MOVES", 1)),
		MaxPushRefs:     int(p.int("RGIT_MAX_PUSH_REFS", 1)),
		MaxPushOptions:  int(p.int("RGIT_MAX_PUSH_OPTIONS", 1)),
		MaxObjectSize:   p.int("RGIT_MAX_OBJECT_SIZE", 0),
		MaxPackSize:     p.int("RGIT_MAX_PACK_SIZE", 0),
		MaxDeltaDepth:   int(p.int("RGIT_MAX_DELTA_DEPTH", 1)),
		MaxWants:        int(p.int("RGIT_MAX_WANTS", 1)),
		MaxHaves:        int(p.int("RGIT_MAX_HAVES", 1)),
		MaxArgBytes:     int(p.int("RGIT_MAX_ARG_BYTES", 1024)),
		MaxNegotiations: int(p.int("RGIT_MAX_NEGOTIATIONS", 1)),
		NegotiationWait: p.seconds("RGIT_NEGOTIATION_WAIT_SECS", 1),
		RequestTimeout:  p.seconds("RGIT_REQUEST_SECS", 1),
		MinRate:         p.int("RGIT_MIN_RATE", 0),
		MaxAnonPerAddr:  int(p.int("RGIT_MAX_ANON_PER_ADDR", 0)),
		SSHAuth:         p.seconds("RGIT_SSH_AUTH_SECS", 1),
		PeerAddrSet:     strings.TrimSpace(getenv("RGIT_PEER_ADDR")) != "",
		HTTPIdle:        p.seconds("RGIT_HTTP_IDLE_SECS", 1),
		HTTPBodyStall:   p.seconds("RGIT_HTTP_BODY_STALL_SECS", 1),
		SSHIdle:         p.seconds("RGIT_SSH_IDLE_SECS", 1),
		SSHStall:        p.seconds("RGIT_SSH_STALL_SECS", 1),
		LogFormat:       p.oneOf("RGIT_LOG_FORMAT", "auto", "json", "console"),
		MemoryLimit:     p.bytes("RGIT_MEMORY_LIMIT"),
		PrewarmBytes:    p.bytes("RGIT_PREWARM_BYTES"),
		GCInterval:      p.seconds("RGIT_GC_INTERVAL_SECS", 0),
		RedisURL:        p.str("RGIT_REDIS_URL"),
		Upstream:        p.str("RGIT_UPSTREAM"),
		APIAddr:         p.addr("RGIT_API_ADDR"),
		HookAllow:       p.prefixes("RGIT_HOOK_ALLOW"),
		HookRetry:       p.seconds("RGIT_HOOK_RETRY_SECS", 1),
		HookTimeout:     p.seconds("RGIT_HOOK_TIMEOUT_SECS", 1),
		HookBackoff:     time.Duration(p.int("RGIT_HOOK_BACKOFF_MS", 1)) * time.Millisecond,
		HookConcurrency: int(p.int("RGIT_HOOK_CONCURRENCY", 1)),
		HookSweep:       p.seconds("RGIT_HOOK_SWEEP_SECS", 1),

		APIMaxEntries:         int(p.int("RGIT_API_MAX_ENTRIES", 1)),
		APIMaxDiffFiles:       int(p.int("RGIT_API_MAX_DIFF_FILES", 1)),
		APIMaxDiffBytes:       p.positiveBytes("RGIT_API_MAX_DIFF_BYTES"),
		APIMaxDiffFileBytes:   p.positiveBytes("RGIT_API_MAX_DIFF_FILE_BYTES"),
		APIDiffTimeout:        time.Duration(p.int("RGIT_API_DIFF_TIMEOUT_MS", 1)) * time.Millisecond,
		APIRenameLimit:        int(p.int("RGIT_API_RENAME_LIMIT", 1)),
		APIMaxLogScan:         int(p.int("RGIT_API_MAX_LOG_SCAN", 1)),
		APIMaxArchiveBytes:    p.positiveBytes("RGIT_API_MAX_ARCHIVE_BYTES"),
		APIMaxActive:          int(p.int("RGIT_API_MAX_ACTIVE", 0)),
		APIMaxBlameCommits:    int(p.int("RGIT_API_MAX_BLAME_COMMITS", 1)),
		APIBlameTimeout:       time.Duration(p.int("RGIT_API_BLAME_TIMEOUT_MS", 1)) * time.Millisecond,
		APIMaxBlameFileBytes:  p.positiveBytes("RGIT_API_MAX_BLAME_FILE_BYTES"),
		LFSMaxObject:          p.positiveBytes("RGIT_LFS_MAX_OBJECT_SIZE"),
		LFSMaxBatch:           int(p.int("RGIT_LFS_MAX_BATCH_OBJECTS", 1)),
		LFSMaxBatchBody:       p.positiveBytes("RGIT_LFS_MAX_BATCH_BYTES"),
		APISearchMaxBytes:     p.positiveBytes("RGIT_API_SEARCH_MAX_BYTES"),
		APISearchMaxFiles:     int(p.int("RGIT_API_SEARCH_MAX_FILES", 1)),
		APISearchMaxBlobs:     int(p.int("RGIT_API_SEARCH_MAX_BLOBS", 1)),
		APISearchTimeout:      time.Duration(p.int("RGIT_API_SEARCH_TIMEOUT_MS", 1)) * time.Millisecond,
		APISearchMaxFileBytes: p.positiveBytes("RGIT_API_SEARCH_MAX_FILE_BYTES"),
		APILastCommitScan:     int(p.int("RGIT_API_LAST_COMMIT_SCAN", 1)),
		APILastCommitTimeout:  time.Duration(p.int("RGIT_API_LAST_COMMIT_TIMEOUT_MS", 1)) * time.Millisecond,
		LFSMaxAnonBatch:       int(p.int("RGIT_LFS_MAX_ANON_BATCH_OBJECTS", 1)),
	}
	if c.PackURITTL > maxPresignTTL {
		p.fail("RGIT_PACK_URI_SECS", "%d is above %d (S3 refuses presigned URLs valid for longer than 7 days)", int64(c.PackURITTL/time.Second), int64(maxPresignTTL/time.Second))
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		p.fail("RGIT_REDIS_URL", "must start with redis:// or rediss://")
	}
	if c.StoreOpTimeout > c.StoreTimeout {
		p.fail("RGIT_STORE_OP_TIMEOUT_MS", "%v is above RGIT_STORE_TIMEOUT_SECS (%v)", c.StoreOpTimeout, c.StoreTimeout)
	}
	if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail("RGIT_UPSTREAM", "%q is not an http:// or https:// URL", c.Upstream)
	}
	c.MetricsAddr = p.optAddr("RGIT_METRICS_ADDR")
	c.PublicURL = p.baseURL("RGIT_PUBLIC_URL", "http", "https")
	c.PublicSSHURL = p.baseURL("RGIT_PUBLIC_SSH_URL", "ssh")
	c.WebURL = p.baseURL("RGIT_WEB_URL", "http", "https")
	c.PackURIBase = p.prefixURL("RGIT_PACK_URI_BASE", "http", "https")
	if peers := p.str("RGIT_PEERS"); peers != "" {
		m, err := cluster.ParsePeerMap(peers)
		if err != nil {
			p.fail("RGIT_PEERS", "%v", err)
		}
		c.Peers = m
		if c.PeerSvc != "" {
			p.fail("RGIT_PEERS", "set RGIT_PEER_SVC or RGIT_PEERS, not both")
		}
		if _, ok := m[c.Self]; m != nil && c.Self != "" && !ok {
			p.fail("RGIT_SELF", "%q is not in RGIT_PEERS", c.Self)
		}
	}
	if c.Self != "" && !c.Cluster() {
		// A node given a name but no peers would start alone, owning every
		// repository beside the cluster it was meant to join.
		p.fail("RGIT_SELF", "set without RGIT_PEER_SVC or RGIT_PEERS: this node would start as a single node; set one of them to join a cluster, or unset RGIT_SELF")
	}
	if c.Cluster() {
		if c.Self == "" {
			p.fail("RGIT_SELF", "required in cluster mode (RGIT_PEER_SVC or RGIT_PEERS)")
		} else if _, err := cluster.LeaderOf(c.Self); err != nil {
			p.fail("RGIT_SELF", "%v", err)
		}
		if c.PeerSecret == "" {
			p.fail("RGIT_PEER_SECRET", "required in cluster mode (RGIT_PEER_SVC or RGIT_PEERS)")
		}
	}
	tlsConf, err := peertls.Load(peertls.FromEnv(func(k string) string { return strings.TrimSpace(getenv(k)) }))
	if err != nil {
		p.errs = append(p.errs, err)
	}
	c.PeerTLS = tlsConf
	if c.PeerSecret != "" && len(c.PeerSecret) < 16 {
		p.fail("RGIT_PEER_SECRET", "must be at least 16 characters")
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

// LogEncoding is the zap encoding for RGIT_LOG_FORMAT: json and console
// as asked; auto picks console for a person at a terminal and json for
// everything else (a log collector reading a pipe or file).
func LogEncoding(format string, stderrIsTerminal bool) string {
	if format == "auto" {
		if stderrIsTerminal {
			return "console"
		}
		return "json"
	}
	return format
}

// Cluster reports cluster mode: RGIT_PEER_SVC or RGIT_PEERS is set.
func (c *Config) Cluster() bool { return c.PeerSvc != "" || c.Peers != nil }

// PeerStreamAddr is the peer stream listen address: the peer port plus
// one. A single node with RGIT_PEER_ADDR left at its default binds it to
// loopback: there it carries only rgit-admin from the same host, and the
// admin port has no business listening on every interface.
func (c *Config) PeerStreamAddr() (string, error) {
	addr, err := cluster.StreamAddr(c.PeerAddr)
	if err != nil || c.Cluster() || c.PeerAddrSet {
		return addr, err
	}
	_, port, err := net.SplitHostPort(addr)
	return net.JoinHostPort("127.0.0.1", port), err
}

type parser struct {
	getenv func(string) string
	errs   []error
}

func defaultOf(name string) string {
	for _, v := range Vars {
		if v.Name == name {
			return v.Default
		}
	}
	panic("config: undocumented variable " + name)
}

func (p *parser) fail(name, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (p *parser) str(name string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return defaultOf(name)
}

func (p *parser) int(name string, min int64) int64 {
	s := p.str(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.fail(name, "%q is not an integer", s)
		return 0
	}
	if n < min {
		p.fail(name, "%d is below the minimum %d", n, min)
	}
	return n
}

// bytes reads a byte count with an optional binary suffix (Ki, Mi, Gi,
// Ti), as Kubernetes writes memory limits.
func (p *parser) bytes(name string) int64 {
	s := p.str(name)
	mult := int64(1)
	for i, suffix := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if rest, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = rest, int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		p.fail(name, "%q is not a byte count (an integer, optionally with Ki, Mi, Gi or Ti)", p.str(name))
		return 0
	}
	return n * mult
}

// positiveBytes is bytes for a limit that cannot be turned off.
func (p *parser) positiveBytes(name string) int64 {
	n := p.bytes(name)
	if n == 0 {
		p.fail(name, "must be above 0")
	}
	return n
}

func (p *parser) bool(name string) bool {
	switch s := p.str(name); strings.ToLower(s) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	default:
		p.fail(name, "%q is not a boolean (0 or 1)", s)
		return false
	}
}

// maxPresignTTL is the longest validity S3 accepts for a presigned URL.
const maxPresignTTL = 7 * 24 * time.Hour

// autoBool reads "auto" or a boolean, as "auto", "on" or "off".
func (p *parser) autoBool(name string) string {
	if strings.EqualFold(p.str(name), "auto") {
		return "auto"
	}
	if p.bool(name) {
		return "on"
	}
	return "off"
}

// PackURIsOn decides RGIT_PACK_URIS for a store that can presign URLs
// (presigns) or cannot; an error names the setting the store cannot
// honour.
func (c *Config) PackURIsOn(presigns bool) (bool, error) {
	switch {
	case c.PackURIs == "off":
		return false, nil
	case presigns:
		return true, nil
	case c.PackURIs == "on":
		return false, fmt.Errorf("RGIT_PACK_URIS: the store %s cannot presign URLs (only s3:// can); set RGIT_PACK_URIS=0 or auto", c.StoreURL)
	}
	return false, nil
}

func (p *parser) seconds(name string, min int64) time.Duration {
	return time.Duration(p.int(name, min)) * time.Second
}

func (p *parser) addr(name string) string {
	s := p.str(name)
	if _, port, err := net.SplitHostPort(s); err != nil {
		p.fail(name, "%q is not host:port", s)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.fail(name, "%q has a bad port", s)
	}
	return s
}

// prefixes reads comma-separated CIDR prefixes or single addresses.
func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for f := range strings.SplitSeq(p.str(name), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(f); err == nil {
			out = append(out, pre.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		} else {
			p.fail(name, "%q is not a CIDR prefix (10.0.0.0/8) or an address", f)
		}
	}
	return out
}

// optAddr is addr for a variable that may be unset ("").
func (p *parser) optAddr(name string) string {
	if p.str(name) == "" {
		return ""
	}
	return p.addr(name)
}

// baseURL reads an optional URL that others are appended to: one of
// schemes, a host, and nothing else (no user but for ssh, no path, query
// or fragment). It returns it without a trailing slash, "" when unset.
func (p *parser) baseURL(name string, schemes ...string) string {
	return p.url(name, false, schemes...)
}

// prefixURL is baseURL with an optional path prefix: it returns
// scheme://host[:port][/prefix], the prefix without a trailing slash.
func (p *parser) prefixURL(name string, schemes ...string) string {
	return p.url(name, true, schemes...)
}

// url reads a base URL of one of schemes with a host, no credentials, no
// query or fragment, and a path only if withPath; "" when unset.
func (p *parser) url(name string, withPath bool, schemes ...string) string {
	s := p.str(name)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	want := strings.Join(schemes, "://host or ") + "://host"
	switch {
	case err != nil:
		p.fail(name, "%q is not a URL (%s[:port])", s, want)
	case !slices.Contains(schemes, u.Scheme) || u.Host == "" || u.Hostname() == "":
		p.fail(name, "%q is not %s[:port]", s, want)
	case u.User != nil && (u.Scheme != "ssh" || u.User.Username() == ""):
		p.fail(name, "%q: no user name or password in the URL", s)
	case u.User != nil && func() bool { _, set := u.User.Password(); return set }():
		p.fail(name, "%q: no password in the URL", s)
	case withPath && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != ""):
		p.fail(name, "%q: no query or fragment", s)
	case !withPath && (strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != ""):
		p.fail(name, "%q: no path, query or fragment (repositories are at /owner/name)", s)
	default:
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				p.fail(name, "%q has a bad port", s)
			}
		}
		user, path := "", ""
		if u.User != nil {
			user = u.User.Username() + "@"
		}
		if withPath {
			path = strings.TrimSuffix(u.EscapedPath(), "/")
		}
		return u.Scheme + "://" + user + u.Host + path
	}
	return ""
}

func (p *parser) oneOf(name string, allowed ...string) string {
	s := p.str(name)
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	p.fail(name, "%q is not one of %s", s, strings.Join(allowed, ", "))
	return s
}
