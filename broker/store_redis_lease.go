package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lease records live under <prefix>lease:<key>, each with its own expiry;
// <prefix>lease-deadlines is a sorted set of the claimed keys by their
// invocation's deadline (unix ms), so any replica can end a lease whose
// obtaining replica is gone.
// The claim, swap and update are Lua scripts, so two replicas racing on
// one key see one outcome.
var (
	claimLeaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return {1, ARGV[1]}`)
	swapLeaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if cur then return cur end
return ''`)
	updateLeaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)
)

func (s *RedisStore) leaseKey(key string) string { return s.prefix + "lease:" + key }

func (s *RedisStore) deadlinesKey() string { return s.prefix + "lease-deadlines" }

// ClaimLease implements LeaseStore.
func (s *RedisStore) ClaimLease(ctx context.Context, key string, rec []byte, deadline time.Time, ttl time.Duration) ([]byte, bool, error) {
	v, err := claimLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(key), s.deadlinesKey()}, rec, ttl.Milliseconds(),
		deadline.UnixMilli(), key).Slice()
	if err != nil || len(v) != 2 {
		return nil, false, fmt.Errorf("%w: claim lease: %v", ErrStoreUnavailable, err)
	}
	won, _ := v[0].(int64)
	stored, _ := v[1].(string)
	return []byte(stored), won == 1, nil
}

// LoadLease implements LeaseStore.
func (s *RedisStore) LoadLease(ctx context.Context, key string) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.leaseKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: load lease: %v", ErrStoreUnavailable, err)
	}
	return b, nil
}

// SwapLease implements LeaseStore.
func (s *RedisStore) SwapLease(ctx context.Context, key string, rec []byte, ttl time.Duration) ([]byte, error) {
	old, err := swapLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(key)}, rec, ttl.Milliseconds()).Text()
	if err != nil {
		return nil, fmt.Errorf("%w: swap lease: %v", ErrStoreUnavailable, err)
	}
	if old == "" {
		return nil, nil
	}
	return []byte(old), nil
}

// UpdateLease implements LeaseStore.
func (s *RedisStore) UpdateLease(ctx context.Context, key string, old, rec []byte, ttl time.Duration) (bool, error) {
	n, err := updateLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(key)}, old, rec, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("%w: update lease: %v", ErrStoreUnavailable, err)
	}
	return n == 1, nil
}

// DueLeases implements LeaseStore.
func (s *RedisStore) DueLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	keys, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.deadlinesKey(), ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: due leases: %v", ErrStoreUnavailable, err)
	}
	return keys, nil
}

// ForgetLease implements LeaseStore.
func (s *RedisStore) ForgetLease(ctx context.Context, key string) error {
	if err := s.rdb.ZRem(ctx, s.deadlinesKey(), key).Err(); err != nil {
		return fmt.Errorf("%w: forget lease: %v", ErrStoreUnavailable, err)
	}
	return nil
}

// DeferLease implements LeaseStore.
func (s *RedisStore) DeferLease(ctx context.Context, key string, at time.Time) error {
	if err := s.rdb.ZAdd(ctx, s.deadlinesKey(), redis.Z{Score: float64(at.UnixMilli()), Member: key}).Err(); err != nil {
		return fmt.Errorf("%w: defer lease: %v", ErrStoreUnavailable, err)
	}
	return nil
}
