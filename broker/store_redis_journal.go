package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxJournal bounds the revocations a replica remembers to write again
// after a primary change; past it the oldest are forgotten (and counted
// in the log), which only matters if a failover then loses them too.
const maxJournal = 200000

// revocationJournal is what a replica revoked recently, as the scripts
// and arguments that wrote it: each revocation is idempotent, and a plugin
// revocation carries its own watermark, so writing one again later
// covers exactly what it covered at first.
type revocationJournal struct {
	mu      sync.Mutex
	entries []journalEntry // oldest first
}

type journalEntry struct {
	script *redis.Script
	keys   []string
	args   []any
	until  time.Time // all it covers has expired by then
}

func (j *revocationJournal) add(script *redis.Script, keys []string, args []any, until time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.entries) >= maxJournal {
		j.entries = j.entries[1:]
	}
	j.entries = append(j.entries, journalEntry{script: script, keys: keys, args: args, until: until})
}

// live drops what has expired and returns the rest.
func (j *revocationJournal) live(now time.Time) []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	i := 0
	for i < len(j.entries) && !now.Before(j.entries[i].until) {
		i++
	}
	j.entries = j.entries[i:]
	return append([]journalEntry(nil), j.entries...)
}

// reassert writes every journaled revocation again (after a primary
// change: what the old primary held but had not replicated is gone) and
// waits for the replicas.
func (s *RedisStore) reassert(ctx context.Context) (int, error) {
	entries := s.journal.live(time.Now())
	if len(entries) == 0 {
		return 0, nil
	}
	cn := s.rdb.Conn()
	defer cn.Close()
	for _, e := range entries {
		if err := e.script.Run(ctx, cn, e.keys, e.args...).Err(); err != nil {
			return 0, err
		}
	}
	return len(entries), s.replicated(ctx, cn)
}

// Bounds of onConnect's writing the journal again.
const (
	reassertChunk  = 1000
	reassertWithin = 30 * time.Second
)

// onConnect runs on every new connection before it carries a command.
// When the server it reaches is not the one this store last saw (its run
// id differs: the primary restarted, or another one was promoted), it
// first writes every journaled revocation again on that connection. A
// server that came back without some of them (from a snapshot older than
// they are, without the last second of appendfsync everysec, or a
// replica promoted before it had them) so answers nothing on this
// replica until it holds them again: the moment before watchPrimary
// notices the change, when a revoked handle would resolve again, is
// closed. A failure fails the connection (the store is unavailable, and
// fails closed) until they are written; watchPrimary waits for the
// replicas to confirm them.
func (s *RedisStore) onConnect(ctx context.Context, cn *redis.Conn) error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	id, mode, err := serverInfo(ctx, cn)
	var refused redis.Error
	if err != nil && !errors.As(err, &refused) {
		// No answer (a timeout, a broken connection): the server may be
		// a new one, so the connection is not used as if it were not.
		return fmt.Errorf("asking a Redis server which it is: %w", err)
	}
	if err != nil || id == "" || id == s.connPrimary || mode == "sentinel" {
		// A server that will not say (INFO refused) is taken as it is.
		// The failover client runs this on its Sentinel connections
		// too: they hold no data.
		return nil
	}
	// A restarted server answers INFO while it loads its data, and
	// nothing else: it is not used (nor taken as the known primary)
	// until it has loaded, so that the peers' hold (settle) starts
	// when it can serve a resolve, not run out while it loads.
	if loading, err := serverLoading(ctx, cn); err != nil || loading {
		if err == nil {
			err = errors.New("it is still loading its data")
		}
		return fmt.Errorf("a restarted or new Redis primary: %w", err)
	}
	entries := s.journal.live(time.Now())
	n := len(entries)
	// Not cut short by the caller's deadline (a resolve's): every new
	// connection would start over. Pipelined, a journal at its bound
	// takes about a second.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reassertWithin)
	defer cancel()
	for len(entries) > 0 {
		chunk := entries[:min(len(entries), reassertChunk)]
		entries = entries[len(chunk):]
		_, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, e := range chunk {
				e.script.Eval(ctx, p, e.keys, e.args...)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("writing revocations again on a restarted or new Redis primary: %w", err)
		}
	}
	if s.connPrimary != "" && n > 0 {
		s.log.Info("revocations written again on a restarted or new Redis primary before its first use", "revocations", n)
	}
	if s.connPrimary != "" {
		since, err := sinceScript.Run(ctx, cn, []string{s.key("replicas")}).Int64()
		if err != nil {
			since = 0 // the hold then awaits no peer by name: settleChecks
			s.log.Warn("reading the new Redis primary's clock failed; resolves wait a fixed time for the other replicas", "err", err)
		}
		s.settle(time.Now(), since)
	}
	s.connPrimary = id
	return nil
}

// primaryID names the server the store writes to as primary (serverInfo):
// it changes when another server becomes primary, the primary restarts,
// or it is promoted again after following another.
func (s *RedisStore) primaryID(ctx context.Context) (string, error) {
	id, _, err := serverInfo(ctx, s.rdb)
	return id, err
}

// serverLoading says whether the server c reaches is loading its data
// (a restart: its snapshot or append-only file).
func serverLoading(ctx context.Context, c redis.Cmdable) (bool, error) {
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "loading:"); ok {
			return strings.TrimSpace(v) == "1", nil
		}
	}
	return false, nil
}

// serverInfo is the id and mode (standalone, sentinel) of the server c
// reaches. The id is its run id and replication id: a server that
// followed another (a failover, then a failback) took that one's data,
// and is a new primary once promoted again (a new replication id) though
// its process, so its run id, is the same.
func serverInfo(ctx context.Context, c redis.Cmdable) (id, mode string, err error) {
	info, err := c.Info(ctx).Result() // the default sections: server, replication
	if err != nil {
		return "", "", err
	}
	var run, repl string
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			run = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			repl = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "redis_mode:"); ok {
			mode = strings.TrimSpace(v)
		}
	}
	if run == "" {
		return "", mode, nil
	}
	return run + " " + repl, mode, nil
}

// watchPrimary notices a primary change (a failover, or a restart) within
// a feed ping: the grant cache stops at once and is used again only when
// its feed proves itself on the new primary, and every journaled
// revocation is written again, until that succeeds.
func (s *RedisStore) watchPrimary(ctx context.Context) {
	var known string
	owed := false
	t := time.NewTicker(s.feedPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.switched:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		id, err := s.primaryID(pctx)
		cancel()
		if err != nil || id == "" {
			continue
		}
		pctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		_ = s.markPresence(pctx) // best effort: no peer seen means no wait
		cancel()
		if known != "" && id != known {
			s.primaryChanged()
			owed = true
		}
		known = id
		if owed {
			rctx, cancel := context.WithTimeout(ctx, s.ackWithin)
			n, err := s.reassert(rctx)
			cancel()
			if err == nil {
				owed = false
				s.log.Info("revocations written again after a primary change", "revocations", n)
			} else {
				s.log.Warn("writing revocations again after a primary change failed; retrying", "revocations", n, "err", err)
			}
		}
	}
}

// primaryChanged stops the grant cache and makes the feed subscribe
// again (to the new primary).
func (s *RedisStore) primaryChanged() {
	s.cache.down()
	s.epoch.Add(1)
}

// watchSentinel listens for Sentinel's +switch-master announcements, so a
// failover is acted on when Sentinel announces it rather than at the
// next poll. It moves to the next Sentinel when one fails.
func (s *RedisStore) watchSentinel(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		addr := s.sentinel.Addresses[i%len(s.sentinel.Addresses)]
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: s.sentinel.Username,
			Password: s.sentinelPassword, DialTimeout: 2 * time.Second})
		ps := sc.Subscribe(ctx, "+switch-master")
		for ctx.Err() == nil {
			// A read deadline, not ctx, ends a wait: go-redis does not
			// interrupt a read when ctx ends.
			v, err := ps.ReceiveTimeout(ctx, time.Second)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if err != nil {
				break
			}
			msg, ok := v.(*redis.Message)
			if !ok {
				continue
			}
			if name, _, _ := strings.Cut(msg.Payload, " "); name == s.sentinel.MasterName {
				// At once, not after a poll confirms it: the failover
				// client moves on this same announcement, and a grant it
				// then reads from the new primary must not be cached on a
				// feed still on the old one.
				s.primaryChanged()
				select {
				case s.switched <- struct{}{}:
				default:
				}
			}
		}
		ps.Close()
		sc.Close()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
