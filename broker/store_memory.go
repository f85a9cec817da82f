package broker

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/serve"
)

// MemoryStore keeps grants in process memory: the embedded default. A
// sweeper drops grants past expiry plus retention, and the store refuses
// new grants beyond its maximum, so it cannot grow without bound.
type MemoryStore struct {
	max       int
	retention time.Duration // keep expired grants this long (audit says "expired")
	tombstone time.Duration // remember revocations this long
	now       func() time.Time

	mu              sync.RWMutex
	grants          map[HandleKey]*memEntry
	byInvocation    map[string][]HandleKey
	byPlugin        map[string]map[string]struct{} // plugin -> invocations
	revokedInv      map[string]time.Time           // invocation -> forget after
	pluginRevokedAt map[string]time.Time
	leases          map[string]memLease // lease records (lease_store.go)
	led             *memLedger          // the ledger (ledger_memory.go), made on first use
}

type memEntry struct {
	g       *Grant
	revoked bool
}

// NewMemoryStore returns a store holding at most max grants. Expired grants
// stay for retention; revocations are remembered for tombstone (at least
// the longest handle lifetime).
func NewMemoryStore(max int, retention, tombstone time.Duration, now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{
		max: max, retention: retention, tombstone: tombstone, now: now,
		grants:          map[HandleKey]*memEntry{},
		byInvocation:    map[string][]HandleKey{},
		byPlugin:        map[string]map[string]struct{}{},
		revokedInv:      map[string]time.Time{},
		pluginRevokedAt: map[string]time.Time{},
	}
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, k HandleKey, g *Grant, maxPerInvocation int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.revokedInv[g.InvocationID]; ok {
		return ErrInvocationRevoked
	}
	if at, ok := s.pluginRevokedAt[g.PluginID]; ok && !g.IssuedAt.After(at) {
		return ErrInvocationRevoked
	}
	if len(s.byInvocation[g.InvocationID]) >= maxPerInvocation {
		return ErrIssueLimit
	}
	if len(s.grants) >= s.max {
		s.sweepLocked(s.now())
		if len(s.grants) >= s.max {
			return ErrStoreFull
		}
	}
	s.grants[k] = &memEntry{g: g}
	s.byInvocation[g.InvocationID] = append(s.byInvocation[g.InvocationID], k)
	invs := s.byPlugin[g.PluginID]
	if invs == nil {
		invs = map[string]struct{}{}
		s.byPlugin[g.PluginID] = invs
	}
	invs[g.InvocationID] = struct{}{}
	return nil
}

// Get implements Store. It takes a read lock and does not allocate.
func (s *MemoryStore) Get(_ context.Context, k HandleKey) (*Grant, error) {
	s.mu.RLock()
	e := s.grants[k]
	var g *Grant
	revoked := false
	if e != nil {
		g, revoked = e.g, e.revoked
	}
	s.mu.RUnlock()
	switch {
	case g == nil:
		return nil, ErrHandleUnknown
	case revoked:
		return g, ErrHandleRevoked
	}
	return g, nil
}

// Find implements Store: a scan of the grants.
func (s *MemoryStore) Find(ctx context.Context, fp string) (HandleKey, *Grant, error) {
	s.mu.RLock()
	var found *HandleKey
	for k := range s.grants {
		if strings.HasPrefix(k.String(), fp) {
			found = &k
			break
		}
	}
	s.mu.RUnlock()
	if found == nil {
		return HandleKey{}, nil, ErrHandleUnknown
	}
	g, err := s.Get(ctx, *found)
	return *found, g, err
}

// RevokeKey implements Store.
func (s *MemoryStore) RevokeKey(_ context.Context, k HandleKey) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.grants[k]
	if e == nil || e.revoked {
		return false, nil
	}
	e.revoked = true
	return true, nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(_ context.Context, k HandleKey, g *Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.grants[k]
	switch {
	case e == nil:
		return ErrHandleUnknown
	case e.revoked:
		return ErrHandleRevoked
	}
	e.g = g
	return nil
}

// RevokeInvocation implements Store.
func (s *MemoryStore) RevokeInvocation(_ context.Context, id string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokedInv[id] = s.now().Add(s.tombstone)
	return s.revokeInvocationLocked(id), nil
}

func (s *MemoryStore) revokeInvocationLocked(id string) int {
	n := 0
	for _, k := range s.byInvocation[id] {
		if e := s.grants[k]; e != nil && !e.revoked {
			e.revoked = true
			n++
		}
	}
	return n
}

// RevokePlugin implements Store.
func (s *MemoryStore) RevokePlugin(_ context.Context, id string, at time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.After(s.pluginRevokedAt[id]) {
		s.pluginRevokedAt[id] = at
	}
	n := 0
	for inv := range s.byPlugin[id] {
		for _, k := range s.byInvocation[inv] {
			if e := s.grants[k]; e != nil && !e.revoked && !e.g.IssuedAt.After(at) {
				e.revoked = true
				n++
			}
		}
	}
	return n, nil
}

// Ping implements Store.
func (s *MemoryStore) Ping(context.Context) error { return nil }

// Len returns how many grants the store holds (live, expired within
// retention, or revoked).
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.grants)
}

// sweep drops grants past expiry plus retention and old tombstones.
func (s *MemoryStore) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.now())
}

func (s *MemoryStore) sweepLocked(now time.Time) {
	s.sweepLeasesLocked(now)
	s.sweepLedgerLocked(now)
	for k, e := range s.grants {
		if now.After(e.g.ExpiresAt.Add(s.retention)) {
			delete(s.grants, k)
		}
	}
	for inv, keys := range s.byInvocation {
		live := keys[:0]
		for _, k := range keys {
			if _, ok := s.grants[k]; ok {
				live = append(live, k)
			}
		}
		if len(live) == 0 {
			delete(s.byInvocation, inv)
		} else {
			s.byInvocation[inv] = live
		}
	}
	for p, invs := range s.byPlugin {
		for inv := range invs {
			if _, ok := s.byInvocation[inv]; !ok {
				delete(invs, inv)
			}
		}
		if len(invs) == 0 {
			delete(s.byPlugin, p)
		}
	}
	for inv, until := range s.revokedInv {
		if now.After(until) {
			delete(s.revokedInv, inv)
		}
	}
	for p, at := range s.pluginRevokedAt {
		if now.After(at.Add(s.tombstone)) {
			delete(s.pluginRevokedAt, p)
		}
	}
}

// Run sweeps every interval until ctx ends.
func (s *MemoryStore) Run(ctx context.Context, interval time.Duration) {
	serve.Every(ctx, interval, func(time.Time) { s.sweep() })
}
