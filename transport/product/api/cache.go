package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
)

// Cache defaults (the numbers).
const (
	DefaultObjectTTL = 7 * 24 * time.Hour
	DefaultRefsTTL   = 5 * time.Second
	DefaultMaxEntry  = 1 << 20
	// opTimeout bounds one cache call: a slow Redis costs latency, never
	// an answer.
	opTimeout = 500 * time.Millisecond
)

// Cache is the read API's shared answer cache in Redis (RGIT_REDIS_URL).
//
// Keys: "v1:{gen}:{owner}/{name}:{suffix}" hold answers, with a TTL (7
// days for object-id answers, 5 s for refs); "gen:{owner}/{name}" is the
// repository's generation counter and has none. Only public
// repositories' answers are stored (private ones are never cached), so a
// stored answer may be served to any caller. Bumping the generation makes
// every answer of the repository unreachable at once; that is why Redis
// must evict only keys with a TTL (maxmemory-policy volatile-lru): an
// evicted counter would read back as an older generation and bring purged
// answers back.
type Cache struct {
	rdb       redis.UniversalClient
	addr      string // Redis's host:port, for log lines
	log       *zap.Logger
	objectTTL time.Duration
	refsTTL   time.Duration
	maxEntry  int
}

// CacheOptions tunes a Cache; zero values take the defaults.
type CacheOptions struct {
	ObjectTTL, RefsTTL time.Duration
	MaxEntry           int
}

// OpenCache connects to a redis:// or rediss:// URL. Nothing is contacted
// yet; CheckPolicy does that. go-redis's own log lines (its package-wide
// logger) go to log at debug level from then on (RedisLogger).
func OpenCache(rawURL string, log *zap.Logger, o CacheOptions) (*Cache, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if log != nil {
		redis.SetLogger(RedisLogger{log.Named("redis")})
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = opTimeout, opTimeout, opTimeout
	// One retry covers a pooled connection Redis closed; more would make
	// an outage cost every request seconds instead of a refused dial.
	opt.MaxRetries, opt.MinRetryBackoff, opt.MaxRetryBackoff = 1, 5*time.Millisecond, 20*time.Millisecond
	opt.DialerRetries, opt.DialerRetryTimeout = 1, 10*time.Millisecond
	c := NewCache(redis.NewClient(opt), log, o)
	c.addr = opt.Addr
	return c, nil
}

// RedisLogger carries go-redis's log lines (a pool that failed to dial, a
// dropped connection) into zap at debug level: left alone, go-redis
// prints them as plain text on stderr among the JSON lines, one for each
// request while Redis is down. What an outage means for rgit is said once,
// in rgit's own words (CheckPolicy, the cache's warnings).
type RedisLogger struct{ Log *zap.Logger }

// Printf implements go-redis's logging interface.
func (l RedisLogger) Printf(_ context.Context, format string, v ...any) {
	l.Log.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// NewCache wraps an existing client (tests).
func NewCache(rdb redis.UniversalClient, log *zap.Logger, o CacheOptions) *Cache {
	if log == nil {
		log = zap.NewNop()
	}
	return &Cache{rdb: rdb, log: log, objectTTL: orDefault(o.ObjectTTL, DefaultObjectTTL), refsTTL: orDefault(o.RefsTTL, DefaultRefsTTL),
		maxEntry: orDefault(o.MaxEntry, DefaultMaxEntry)}
}

// Close closes the connection pool.
func (c *Cache) Close() error { return c.rdb.Close() }

func genKey(repoKey string) string { return "gen:" + repoKey }

func entryKey(gen int64, repoKey, suffix string) string {
	return "v1:" + strconv.FormatInt(gen, 10) + ":" + repoKey + ":" + suffix
}

// Generation reads the repository's generation; a repository never
// purged is generation 0. An error means "no cache for this request",
// never a generation.
func (c *Cache) Generation(ctx context.Context, repoKey string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n, err := c.rdb.Get(ctx, genKey(repoKey)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read generation of %s: %w", repoKey, err)
	}
	return n, nil
}

// Get returns the stored answer, if any. Errors count as misses.
func (c *Cache) Get(ctx context.Context, gen int64, repoKey, suffix string) (*entry, bool) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b, err := c.rdb.Get(ctx, entryKey(gen, repoKey, suffix)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			c.log.Warn("read API cache read failed", zap.String("repo", repoKey), zap.Error(err))
		}
		return nil, false
	}
	e, err := decodeEntry(b)
	if err != nil {
		c.log.Warn("read API cache entry unreadable; ignored", zap.String("repo", repoKey), zap.Error(err))
		return nil, false
	}
	return e, true
}

// Put stores an answer under the generation read before it was computed.
// Answers over the size cap are not stored; errors cost only latency.
func (c *Cache) Put(ctx context.Context, gen int64, repoKey, suffix string, e *entry, ttl time.Duration) {
	if len(e.Body) > c.maxEntry {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if err := c.rdb.Set(ctx, entryKey(gen, repoKey, suffix), encodeEntry(e), ttl).Err(); err != nil {
		c.log.Warn("read API cache write failed", zap.String("repo", repoKey), zap.Error(err))
	}
}

// RefsChanged drops the repository's refs answer (after a push). Best
// effort: the 5 s TTL heals a failure.
func (c *Cache) RefsChanged(ctx context.Context, r names.Repo) error {
	repoKey := r.Key()
	gen, err := c.Generation(ctx, repoKey)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := c.rdb.Del(ctx, entryKey(gen, repoKey, string(Refs))).Err(); err != nil {
		return fmt.Errorf("drop cached refs of %s: %w", repoKey, err)
	}
	return nil
}

// ErrPurge wraps a failed purge: the change that needed it is done, but
// cached answers may still be served until `rgit-admin purge-cache`
// succeeds.
var ErrPurge = errors.New("cached answers were not purged")

// Purge bumps the repository's generation, making every cached answer of
// it unreachable at once (visibility flip, delete, purge-cache). It must
// not fail quietly: callers report its error.
func (c *Cache) Purge(ctx context.Context, r names.Repo) error {
	repoKey := r.Key()
	ctx, cancel := context.WithTimeout(ctx, 5*opTimeout)
	defer cancel()
	if err := c.rdb.Incr(ctx, genKey(repoKey)).Err(); err != nil {
		return fmt.Errorf("%w for %s (run rgit-admin purge-cache %s to retry): %w", ErrPurge, repoKey, r, err)
	}
	return nil
}

// PolicyOK reports whether a maxmemory-policy keeps generation counters
// (keys without a TTL) safe from eviction while still evicting answers:
// volatile-lru or another volatile-* policy.
func PolicyOK(policy string) bool { return PolicyProblem(policy) == "" }

// PolicyProblem says what goes wrong with the cache under a Redis
// maxmemory-policy, "" for the volatile-* policies it needs.
func PolicyProblem(policy string) string {
	switch {
	case strings.HasPrefix(policy, "volatile-"):
		return ""
	case strings.HasPrefix(policy, "allkeys-"):
		return "it may evict a generation counter, which then reads back as an older generation and brings purged answers back, including those of repositories made private"
	case policy == "noeviction":
		return "a full Redis refuses every write, generation bumps included: set-visibility, delete-repo and purge-cache then fail to purge, and a repository made private keeps its cached answers until memory is freed and purge-cache succeeds"
	}
	return "rgit knows only the volatile-* policies to evict answers (they have a TTL) and never a generation counter (it has none)"
}

// CheckPolicy reads Redis's maxmemory-policy and logs one line unless it
// keeps counters safe: an error for a wrong policy, a warning when Redis
// cannot be reached or refuses to say (managed Redis services often
// refuse CONFIG). It returns the policy ("" when it could not be read).
func (c *Cache) CheckPolicy(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := c.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	var reply redis.Error
	switch {
	case err != nil && errors.As(err, &reply):
		c.log.Warn("read API cache: Redis would not say its maxmemory-policy; make sure it is volatile-lru (or another volatile-* policy), or purged answers can come back",
			zap.String("redis", c.addr), zap.Error(err))
		return ""
	case err != nil:
		c.log.Warn("read API cache: Redis is unreachable; answers are computed without it, and set-visibility, delete-repo and purge-cache fail to purge, until it answers (its maxmemory-policy is not checked)",
			zap.String("redis", c.addr), zap.Error(err))
		return ""
	}
	policy := m["maxmemory-policy"]
	if problem := PolicyProblem(policy); problem != "" {
		c.log.Error("read API cache: Redis maxmemory-policy is "+policy+"; it must be volatile-lru (or another volatile-* policy): "+problem,
			zap.String("redis", c.addr), zap.String("maxmemory_policy", policy))
	}
	return policy
}

// Stored form: one JSON header line, then the body.
func encodeEntry(e *entry) []byte {
	h, _ := json.Marshal(e)
	out := make([]byte, 0, len(h)+1+len(e.Body))
	return append(append(append(out, h...), '\n'), e.Body...)
}

func decodeEntry(b []byte) (*entry, error) {
	h, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, errors.New("no header line")
	}
	var e entry
	if err := json.Unmarshal(h, &e); err != nil {
		return nil, err
	}
	e.Body = body
	return &e, nil
}
