package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRevocationAck bounds how long one revocation call keeps writing
// a revocation until enough replicas confirm it (through a failover: the
// old primary refuses to confirm, the failover client moves to the new
// one, and the revocation is written there). Past it the revocation is
// owed (ErrRevocationUnreplicated; see Broker).
const defaultRevocationAck = 5 * time.Second

// revoke runs a revocation script and acknowledges it only once enough
// replicas hold it. Redis replicates asynchronously: a revocation the
// primary applied but had not yet sent when it lost its role is lost
// when Sentinel promotes a replica, and the handle resolves again. WAIT
// on the connection that ran the script closes that gap; a wait that
// falls short runs the script again (it is idempotent), on whichever
// server is primary by then, until s.ackWithin has passed. Every
// revocation is also journaled, to be written again after a primary
// change (reassert).
func (s *RedisStore) revoke(ctx context.Context, script *redis.Script, keys []string, args ...any) (int, error) {
	return s.revokeUntil(ctx, time.Now().Add(s.tombstone), script, keys, args...)
}

// revokeUntil is revoke for a revocation journaled until until (what it
// covers lives longer than a handle: an access grant).
func (s *RedisStore) revokeUntil(ctx context.Context, until time.Time, script *redis.Script, keys []string, args ...any) (int, error) {
	s.journal.add(script, keys, args, until)
	start := time.Now()
	best := 0
	for attempt := 0; ; attempt++ {
		n, err := s.revokeOnce(ctx, script, keys, args...)
		best = max(best, n)
		if err == nil {
			return best, nil
		}
		if time.Since(start) >= s.ackWithin {
			return best, err
		}
		select {
		case <-ctx.Done():
			return best, err
		case <-time.After(min(50*time.Millisecond<<min(attempt, 4), 500*time.Millisecond)):
		}
	}
}

func (s *RedisStore) revokeOnce(ctx context.Context, script *redis.Script, keys []string, args ...any) (int, error) {
	cn := s.rdb.Conn()
	defer cn.Close()
	n, err := script.Run(ctx, cn, keys, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStoreUnavailable, err)
	}
	return n, s.replicated(ctx, cn)
}

// replicated waits until s.waitReplicas replicas acknowledged every write
// cn made, for at most s.waitTimeout. Only a primary without Sentinel
// and without a configured count waits for at most the replicas it has
// connected (none for a lone primary): with Sentinel, a primary that has
// lost its replica is exactly the one about to be replaced, and what it
// alone holds is lost at the failover.
func (s *RedisStore) replicated(ctx context.Context, cn *redis.Conn) error {
	want := s.waitReplicas
	if want <= 0 {
		return nil
	}
	if s.capWait {
		// ROLE lists the connected replicas. A server that refuses it
		// (some managed offerings) gets the configured count.
		if role, err := cn.Do(ctx, "ROLE").Slice(); err == nil && len(role) >= 3 {
			if reps, ok := role[2].([]any); ok && len(reps) < want {
				want = len(reps)
			}
		}
		if want == 0 {
			return nil
		}
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
