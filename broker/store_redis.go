package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore shares grants and revocations between broker replicas through
// one Redis server (a single primary, or Sentinel; not Cluster: the
// revocation scripts touch keys they find at run time).
//
// Layout, under KeyPrefix:
//
//	h:<sha256 hex>   hash {g: grant JSON, r: "0"|"1", i: issued_at unix ms}, PEXPIREAT expires_at + retention
//	inv:<id>         set of handle hashes of an invocation (lives as long as its longest grant)
//	plg:<id>         set of invocation ids of a plugin
//	invrev:<id>      revoked-invocation tombstone
//	plgrev:<id>      plugin revocation watermark (unix ms)
//
// Put and the revocations are Lua scripts, so each is atomic; Get is one
// HMGET, so a revocation is visible to every replica on its next Resolve.
type RedisStore struct {
	rdb       *redis.Client // one primary, or the failover client (Sentinel)
	prefix    string
	retention time.Duration
	tombstone time.Duration
	cache     *grantCache // nil: every Get is a round trip

	// Revocations wait for this many replicas (0: never), capped at
	// those connected when capWait, for at most waitTimeout per WAIT, and
	// are written again until they are confirmed, for at most ackWithin.
	waitReplicas int
	capWait      bool
	waitTimeout  time.Duration
	ackWithin    time.Duration

	journal revocationJournal // written again after a primary change
	// connMu serializes onConnect; connPrimary is the run id of the
	// server the journal was last written again to on a new connection.
	connMu           sync.Mutex
	connPrimary      string
	peersAt          atomic.Int64     // when another replica was last seen (mono; markPresence)
	settleUntil      atomic.Int64     // until when resolves wait (mono; settle)
	presenceClock    func() time.Time // tests: this replica's wall clock, if not time.Now
	peers            presence         // the peers seen, and those a hold awaits
	epoch            atomic.Uint64    // bumped at each primary change: the feed subscribes again
	switched         chan struct{}    // Sentinel announced a new primary
	fedInvalidation  func(msg string) // tests: the feed applied a revocation message
	sentinel         *SentinelConfig
	sentinelPassword string
	log              *slog.Logger

	// The grant cache's feed publishes a probe on probeChannel every
	// feedPing (settable by tests; see Run).
	probeChannel string
	feedPing     time.Duration
}

// NewRedisStore connects per cfg. Expired grants stay for retention;
// revocations are remembered for tombstone.
func NewRedisStore(cfg RedisConfig, retention, tombstone time.Duration) (*RedisStore, error) {
	opts := &redis.Options{
		Addr:         cfg.Address,
		Username:     cfg.Username,
		DB:           cfg.DB,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   1,
		// Resolve is on the proxy's hot path: fail fast, never queue long.
		PoolTimeout: 2 * time.Second,
	}
	if cfg.PasswordFile != "" {
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("broker.store.redis.password_file: %w", err)
		}
		opts.Password = strings.TrimSpace(string(b))
	}
	if cfg.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("broker.store.redis.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, errors.New("broker.store.redis.ca_file: no PEM certificate in it")
			}
			tc.RootCAs = pool
		}
		opts.TLSConfig = tc
	}
	// Every new connection first makes sure its server holds this
	// store's revocations (onConnect); st is set before any connection
	// is made (they are made on first use).
	var st *RedisStore
	opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return st.onConnect(ctx, cn) }
	var rdb *redis.Client
	var sentinelPassword string
	if sn := cfg.Sentinel; sn != nil {
		// The failover client asks the Sentinels for the primary and
		// follows a failover; writes then go to the promoted replica.
		fo := &redis.FailoverOptions{MasterName: sn.MasterName, SentinelAddrs: sn.Addresses, SentinelUsername: sn.Username,
			Username: opts.Username, Password: opts.Password, DB: opts.DB, TLSConfig: opts.TLSConfig,
			DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout,
			MaxRetries: opts.MaxRetries, PoolTimeout: opts.PoolTimeout, OnConnect: opts.OnConnect}
		if sn.PasswordFile != "" {
			b, err := os.ReadFile(sn.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("broker.store.redis.sentinel.password_file: %w", err)
			}
			fo.SentinelPassword = strings.TrimSpace(string(b))
		}
		sentinelPassword = fo.SentinelPassword
		rdb = redis.NewFailoverClient(fo)
	} else {
		rdb = redis.NewClient(opts)
	}
	st = &RedisStore{rdb: rdb, prefix: cfg.KeyPrefix, retention: retention, tombstone: tombstone,
		waitReplicas: cfg.RevocationReplicas, waitTimeout: cfg.RevocationWait, ackWithin: defaultRevocationAck,
		probeChannel: cfg.KeyPrefix + "feed-probe:" + rand.Text(), feedPing: feedPing,
		switched: make(chan struct{}, 1), sentinel: cfg.Sentinel, sentinelPassword: sentinelPassword, log: slog.New(slog.DiscardHandler)}
	if st.waitReplicas == 0 {
		// With Sentinel a revocation needs a replica: a primary that has
		// none connected is the one a failover replaces. A lone primary
		// (no Sentinel) waits for the replicas it has, if any.
		st.waitReplicas, st.capWait = 1, cfg.Sentinel == nil
	}
	if st.waitTimeout == 0 {
		st.waitTimeout = defaultRevocationWait
	}
	if cfg.LocalCache >= 0 {
		size := cfg.LocalCache
		if size == 0 {
			size = defaultLocalCache
		}
		st.cache = newGrantCache(size)
	}
	return st, nil
}

// SetLogger makes the store log to l (primary changes, revocations
// written again); call it before Run.
func (s *RedisStore) SetLogger(l *slog.Logger) { s.log = l }

// channel is where revocations are announced to every replica's cache.
func (s *RedisStore) channel() string { return s.prefix + "revocations" }

// Close closes the connection pool.
func (s *RedisStore) Close() error { return s.rdb.Close() }

func (s *RedisStore) key(parts ...string) string { return s.prefix + strings.Join(parts, "") }

var putScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local w = redis.call('GET', KEYS[5])
if w and tonumber(w) >= tonumber(ARGV[4]) then return -1 end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[3]) then return -2 end
redis.call('HSET', KEYS[1], 'g', ARGV[1], 'r', '0', 'i', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
local want = tonumber(ARGV[2]) - tonumber(ARGV[7])
redis.call('SADD', KEYS[2], ARGV[5])
if redis.call('PTTL', KEYS[2]) < want then redis.call('PEXPIREAT', KEYS[2], ARGV[2]) end
redis.call('SADD', KEYS[3], ARGV[6])
if redis.call('PTTL', KEYS[3]) < want then redis.call('PEXPIREAT', KEYS[3], ARGV[2]) end
return 1
`)

// Put implements Store.
func (s *RedisStore) Put(ctx context.Context, k HandleKey, g *Grant, maxPerInvocation int) error {
	body, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encode grant: %w", err)
	}
	hk := k.String()
	expireAt := g.ExpiresAt.Add(s.retention).UnixMilli()
	res, err := putScript.Run(ctx, s.rdb,
		[]string{s.key("h:", hk), s.key("inv:", g.InvocationID), s.key("plg:", g.PluginID),
			s.key("invrev:", g.InvocationID), s.key("plgrev:", g.PluginID)},
		body, expireAt, maxPerInvocation, g.IssuedAt.UnixMilli(), hk, g.InvocationID, time.Now().UnixMilli(),
	).Int()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	switch res {
	case -1:
		return ErrInvocationRevoked
	case -2:
		return ErrIssueLimit
	}
	return nil
}

// Get implements Store: from the local grant cache when it holds the
// grant and its invalidation feed is live, else one round trip.
func (s *RedisStore) Get(ctx context.Context, k HandleKey) (*Grant, error) {
	if err := s.settling(time.Now()); err != nil {
		return nil, err
	}
	hk := k.String()
	gen, ok := s.cache.begin()
	if ok {
		if g := s.cache.get(hk); g != nil {
			return g, nil
		}
	}
	g, err := s.get(ctx, hk)
	if serr := s.settling(time.Now()); serr != nil {
		// The round trip itself may have met the change (its
		// connection was the first to the new server).
		return nil, serr
	}
	if err == nil && ok {
		s.cache.put(gen, hk, g)
	}
	return g, err
}

func (s *RedisStore) get(ctx context.Context, hk string) (*Grant, error) {
	k := hk
	vals, err := s.rdb.HMGet(ctx, s.key("h:", k), "g", "r").Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	body, ok := vals[0].(string)
	if !ok {
		return nil, ErrHandleUnknown
	}
	g := &Grant{}
	if err := json.Unmarshal([]byte(body), g); err != nil {
		return nil, fmt.Errorf("%w: stored grant is corrupt", ErrStoreUnavailable)
	}
	if r, _ := vals[1].(string); r != "0" {
		return g, ErrHandleRevoked
	}
	return g, nil
}

var revokeInvocationScript = redis.NewScript(`
redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
local n = 0
for _, hk in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local k = ARGV[2] .. 'h:' .. hk
  if redis.call('HGET', k, 'r') == '0' then redis.call('HSET', k, 'r', '1'); n = n + 1 end
end
redis.call('PUBLISH', ARGV[3], 'inv:' .. ARGV[4])
return n
`)

// RevokeInvocation implements Store.
func (s *RedisStore) RevokeInvocation(ctx context.Context, id string) (int, error) {
	n, err := s.revoke(ctx, revokeInvocationScript,
		[]string{s.key("inv:", id), s.key("invrev:", id)},
		s.tombstone.Milliseconds(), s.prefix, s.channel(), id)
	s.cache.invalidate("inv:" + id)
	return n, err
}

var revokePluginScript = redis.NewScript(`
local w = tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[2])
if not cur or tonumber(cur) < w then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) end
local n = 0
for _, inv in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  for _, hk in ipairs(redis.call('SMEMBERS', ARGV[3] .. 'inv:' .. inv)) do
    local k = ARGV[3] .. 'h:' .. hk
    local f = redis.call('HMGET', k, 'r', 'i')
    if f[1] == '0' and (not f[2] or tonumber(f[2]) <= w) then redis.call('HSET', k, 'r', '1'); n = n + 1 end
  end
end
redis.call('PUBLISH', ARGV[4], 'plg:' .. ARGV[5])
return n
`)

// RevokePlugin implements Store.
func (s *RedisStore) RevokePlugin(ctx context.Context, id string, at time.Time) (int, error) {
	n, err := s.revoke(ctx, revokePluginScript,
		[]string{s.key("plg:", id), s.key("plgrev:", id)},
		strconv.FormatInt(at.UnixMilli(), 10), s.tombstone.Milliseconds(), s.prefix, s.channel(), id)
	s.cache.invalidate("plg:" + id)
	return n, err
}

// Find implements Store: a SCAN for the key's prefix.
func (s *RedisStore) Find(ctx context.Context, fp string) (HandleKey, *Grant, error) {
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, s.key("h:", fp)+"*", 1000).Result()
		if err != nil {
			return HandleKey{}, nil, fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
		}
		if len(keys) > 0 {
			hk := strings.TrimPrefix(keys[0], s.key("h:"))
			var k HandleKey
			if b, err := hex.DecodeString(hk); err != nil || len(b) != len(k) {
				return HandleKey{}, nil, ErrHandleUnknown
			} else {
				copy(k[:], b)
			}
			g, err := s.get(ctx, hk)
			return k, g, err
		}
		if cursor = next; cursor == 0 {
			return HandleKey{}, nil, ErrHandleUnknown
		}
	}
}

var renewScript = redis.NewScript(`
local r = redis.call('HGET', KEYS[1], 'r')
if not r then return 0 end
if r ~= '0' then return -1 end
redis.call('HSET', KEYS[1], 'g', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
local want = tonumber(ARGV[2]) - tonumber(ARGV[5])
if redis.call('PTTL', KEYS[2]) < want then redis.call('PEXPIREAT', KEYS[2], ARGV[2]) end
if redis.call('PTTL', KEYS[3]) < want then redis.call('PEXPIREAT', KEYS[3], ARGV[2]) end
redis.call('PUBLISH', ARGV[3], 'h:' .. ARGV[4])
return 1
`)

// Renew implements Store: the grant and its index sets live on until the
// new expiry plus retention, and every replica's cache drops the old one.
func (s *RedisStore) Renew(ctx context.Context, k HandleKey, g *Grant) error {
	body, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encode grant: %w", err)
	}
	hk := k.String()
	res, err := renewScript.Run(ctx, s.rdb,
		[]string{s.key("h:", hk), s.key("inv:", g.InvocationID), s.key("plg:", g.PluginID)},
		body, g.ExpiresAt.Add(s.retention).UnixMilli(), s.channel(), hk, time.Now().UnixMilli()).Int()
	s.cache.invalidate("h:" + hk)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	switch res {
	case 0:
		return ErrHandleUnknown
	case -1:
		return ErrHandleRevoked
	}
	return nil
}

var revokeKeyScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'r') ~= '0' then return 0 end
redis.call('HSET', KEYS[1], 'r', '1')
redis.call('PUBLISH', ARGV[1], 'h:' .. ARGV[2])
return 1
`)

// RevokeKey implements Store.
func (s *RedisStore) RevokeKey(ctx context.Context, k HandleKey) (bool, error) {
	hk := k.String()
	n, err := s.revoke(ctx, revokeKeyScript, []string{s.key("h:", hk)}, s.channel(), hk)
	s.cache.invalidate("h:" + hk)
	return n == 1, err
}

// Ping implements Store.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	return nil
}

// Persistence reports how the Redis primary persists its data, for a
// startup warning: "" when AOF is on; otherwise what a restart would lose
// (also when INFO, which notices a restart, is refused).
// Managed Redis that refuses CONFIG answers "" (unknown, not warned).
func (s *RedisStore) Persistence(ctx context.Context) string {
	var refused redis.Error
	if _, _, err := serverInfo(ctx, s.rdb); errors.As(err, &refused) {
		return "Redis refuses INFO to this user: a restart or failover of Redis is not noticed, so revocations it lost are not written again and other replicas do not wait for them; allow INFO for the broker's Redis user"
	}
	v, err := s.rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil || v["appendonly"] == "yes" {
		return ""
	}
	save, _ := s.rdb.ConfigGet(ctx, "save").Result()
	if save["save"] != "" {
		return "Redis runs with RDB snapshots but no AOF: a restart reloads an older snapshot, so revocations made since it are forgotten and those handles resolve again until they expire; enable appendonly yes (appendfsync everysec)"
	}
	return "Redis runs without persistence: a restart loses every live handle (plugins get handle_invalid until they ask for new ones) and every revocation record; enable appendonly yes (appendfsync everysec)"
}
