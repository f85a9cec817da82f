package broker

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// revoke runs a revocation script and acknowledges it only once enough
// replicas hold it. Redis replicates asynchronously: a revocation the
// primary applied but had not yet sent when it died is lost when Sentinel
// promotes a replica, and the handle resolves again. WAIT on the
// connection that ran the script closes that gap.
func (s *RedisStore) revoke(ctx context.Context, script *redis.Script, keys []string, args ...any) (int, error) {
	cn := s.rdb.Conn()
	defer cn.Close()
	n, err := script.Run(ctx, cn, keys, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	return n, s.replicated(ctx, cn)
}

// replicated waits until s.waitReplicas replicas (at most as many as the
// primary has connected; none for a lone primary) acknowledged every
// write cn made, for at most s.waitTimeout.
func (s *RedisStore) replicated(ctx context.Context, cn *redis.Conn) error {
	want := s.waitReplicas
	if want <= 0 {
		return nil
	}
	// ROLE lists the connected replicas. A server that refuses it (some
	// managed offerings) gets the configured count.
	if role, err := cn.Do(ctx, "ROLE").Slice(); err == nil && len(role) >= 3 {
		if reps, ok := role[2].([]any); ok && len(reps) < want {
			want = len(reps)
		}
	}
	if want == 0 {
		return nil
	}
	got, err := cn.Wait(ctx, want, s.waitTimeout).Result()
	if err != nil {
		return fmt.Errorf("%w: WAIT failed: %v", ErrRevocationUnreplicated, err)
	}
	if int(got) < want {
		return fmt.Errorf("%w (%d of %d replicas within %s)", ErrRevocationUnreplicated, got, want, s.waitTimeout)
	}
	return nil
}
