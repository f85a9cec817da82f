package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// After a primary change (a Redis restart, a failover), each replica
// writes the revocations it journaled again before it uses the new
// server (onConnect). Another replica may reach the new server first and
// resolve a handle whose revocation only the first one journaled. So a
// replica that has peers holds its resolves after it sees the change
// (settling) until every peer it saw lately has marked its presence on
// the new server (a mark is made on a connection, so after that peer's
// journal was written there), for at most settleMax primary checks; a
// replica whose peers were seen only longer ago holds for settleChecks.
// A replica that has seen no peer lately does not wait: it holds every
// journal there is.

// Bounds of settling.
const (
	// settleChecks is how many primary checks (feedPing) a replica
	// holds resolves for after a primary change when it awaits no peer
	// by name; settleMax bounds a hold that awaits peers (one that died
	// at the change never marks again).
	settleChecks = 3
	settleMax    = 10
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
// the marks older than ARGV[2] ms and returns the server's time (ms) and
// the marks left, each id followed by its score. The
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
local out = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
table.insert(out, 1, tostring(now))
return out
`)

// sinceScript reads, on a server that just became this replica's
// primary, from when a peer's presence mark (KEYS[1]) proves that peer
// wrote its journal there: the server's time (ms), or later than every
// mark it already holds. Those came from its snapshot or from the old
// primary, whose clock may be ahead of this one's.
var sinceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if top[2] and tonumber(top[2]) >= now then now = math.floor(tonumber(top[2])) + 1 end
return now
`)

// presence is what a replica knows of its peers: when it last saw each,
// and during a hold, which ones it still awaits on the new primary.
type presence struct {
	mu       sync.Mutex
	seen     map[string]int64 // peer id -> when last seen (mono), within presenceChecks
	awaiting map[string]bool  // peers not yet marked on the new primary
	since    int64            // a mark scored from then on is new (sinceScript)
	holds    uint64           // holds started: a check read before one is not judged by it
}

// markPresence records this replica as present, notes the peers it
// sees there, and ends a hold once every peer it awaits has marked
// itself on the new primary.
func (s *RedisStore) markPresence(ctx context.Context) error {
	p := &s.peers
	p.mu.Lock()
	hold := p.holds
	p.mu.Unlock()
	res, err := presenceScript.Run(ctx, s.rdb, []string{s.key("replicas")}, s.replicaID(),
		(presenceChecks * s.feedPing).Milliseconds()).StringSlice()
	if err != nil {
		return err
	}
	now := time.Now()
	if s.presenceClock != nil {
		now = s.presenceClock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Read before a hold started (a connection to the new primary
	// started it meanwhile), the marks may be the old primary's.
	current := hold == p.holds
	if p.seen == nil {
		p.seen = map[string]int64{}
	}
	others := false
	for i := 1; i+1 < len(res); i += 2 {
		id := res[i]
		if id == s.replicaID() {
			continue
		}
		others = true
		p.seen[id] = mono(now)
		if score, err := strconv.ParseFloat(res[i+1], 64); err == nil && current && p.awaiting[id] && int64(score) >= p.since {
			delete(p.awaiting, id)
		}
	}
	if others {
		s.peersAt.Store(mono(now))
	}
	// settle awaits only the peers seen within the window: the others
	// (each restart is a new id) are forgotten, or seen would grow.
	for id, at := range p.seen {
		if mono(now)-at >= int64(presenceChecks*s.feedPing) {
			delete(p.seen, id)
		}
	}
	if p.awaiting != nil && len(p.awaiting) == 0 {
		p.awaiting = nil
		s.settleUntil.Store(0)
		s.log.Info("every peer has written its revocations again on the new Redis primary: resolves go on")
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
// replica has peers: until the peers seen within presenceChecks have
// marked themselves on the new primary since it became this replica's
// (a score from sinceMs on, see sinceScript; 0 when it could not be
// read), or else for settleChecks.
func (s *RedisStore) settle(now time.Time, sinceMs int64) {
	if !s.hasPeers(now) {
		return
	}
	p := &s.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awaiting = nil
	if sinceMs > 0 {
		for id, at := range p.seen {
			if mono(now)-at < int64(presenceChecks*s.feedPing) {
				if p.awaiting == nil {
					p.awaiting = map[string]bool{}
				}
				p.awaiting[id] = true
			}
		}
	}
	p.since = sinceMs
	p.holds++
	hold := settleChecks * s.feedPing
	if p.awaiting != nil {
		hold = settleMax * s.feedPing
	}
	s.settleUntil.Store(mono(now.Add(hold)))
	s.log.Info("Redis primary changed: resolves wait while the other replicas write their revocations again",
		"peers", len(p.awaiting), "at_most", hold)
}

// settling refuses a resolve while the store settles after a primary
// change: the store is unavailable for it, and the proxy fails closed.
func (s *RedisStore) settling(now time.Time) error {
	if until := s.settleUntil.Load(); until != 0 && mono(now) < until {
		return fmt.Errorf("%w: the Redis primary changed; resolves wait until the other replicas have written their revocations again", ErrStoreUnavailable)
	}
	return nil
}
