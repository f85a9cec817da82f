package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// After a primary change (a Redis restart, a failover), each replica
// writes the revocations it journaled again before it uses the new
// server (onConnect). Another replica may reach the new server first and
// resolve a handle whose revocation only the first one journaled. So a
// replica that has peers holds its resolves for a moment after it sees
// the change (settling): long enough for every peer to notice the change
// on its own primary check and write its journal again. A replica that
// has seen no peer lately does not wait: it holds every journal there is.

// Bounds of settling.
const (
	// settleChecks is how many primary checks (feedPing) a replica
	// holds resolves for after a primary change.
	settleChecks = 3
	// peerMemory is how long a peer seen once counts as present.
	peerMemory = 10 * time.Minute
	// presenceChecks is how many primary checks a replica's presence
	// mark outlives it.
	presenceChecks = 10
)

// monoBase anchors the times settling keeps (peersAt, settleUntil) to
// the monotonic clock: a wall clock stepped back or forward neither
// lengthens a hold nor forgets a peer. Offsets from it are never zero.
var monoBase = time.Now().Add(-time.Hour)

func mono(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// replicaID names this store among the replicas (its feed probe
// channel is unique to it).
func (s *RedisStore) replicaID() string { return s.probeChannel }

// presenceScript marks a replica present (KEYS[1] a sorted set of
// replica ids, ARGV[1] this one's) scored by the server's clock, trims
// the marks older than ARGV[2] ms and says how many are left. The
// server's clock, not each replica's: replicas whose clocks disagree by
// more than the window would trim each other's marks and never see a
// peer.
var presenceScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
`)

// markPresence records this replica as present and notes when another
// replica was last seen there.
func (s *RedisStore) markPresence(ctx context.Context) error {
	n, err := presenceScript.Run(ctx, s.rdb, []string{s.key("replicas")}, s.replicaID(),
		(presenceChecks * s.feedPing).Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n > 1 {
		now := time.Now()
		if s.presenceClock != nil {
			now = s.presenceClock()
		}
		s.peersAt.Store(mono(now))
	}
	return nil
}

// leave removes this replica's presence mark when it stops (after its
// primary check has), so that the replica that takes its place (a
// restart, an upgrade) does not count it as a peer. Best effort: a
// replica that crashed stays counted for presenceChecks.
func (s *RedisStore) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.rdb.ZRem(ctx, s.key("replicas"), s.replicaID()).Err()
}

// hasPeers says whether another replica was seen within peerMemory.
func (s *RedisStore) hasPeers(now time.Time) bool {
	at := s.peersAt.Load()
	return at != 0 && mono(now)-at < int64(peerMemory)
}

// settle starts holding resolves after a primary change, when this
// replica has peers.
func (s *RedisStore) settle(now time.Time) {
	if !s.hasPeers(now) {
		return
	}
	hold := settleChecks * s.feedPing
	s.settleUntil.Store(mono(now.Add(hold)))
	s.log.Info("Redis primary changed: resolves wait while the other replicas write their revocations again", "for", hold)
}

// settling refuses a resolve while the store settles after a primary
// change: the store is unavailable for it, and the proxy fails closed.
func (s *RedisStore) settling(now time.Time) error {
	if until := s.settleUntil.Load(); until != 0 && mono(now) < until {
		return fmt.Errorf("%w: the Redis primary changed; resolves wait until the other replicas have written their revocations again", ErrStoreUnavailable)
	}
	return nil
}
