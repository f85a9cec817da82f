package broker

import (
	"bytes"
	"context"
	"time"
)

// LeaseStore is where replicas agree on one lease per invocation and
// intent. Records are opaque to the store (the lease's id and credentials
// in them are sealed by the broker). Both handle stores implement it.
type LeaseStore interface {
	// ClaimLease stores rec under key for ttl unless a record is there
	// already, and lists key as due at deadline (DueLeases). It returns
	// the record stored under key afterwards: rec when it won, the other
	// one when it lost.
	ClaimLease(ctx context.Context, key string, rec []byte, deadline time.Time, ttl time.Duration) (stored []byte, won bool, err error)
	// LoadLease returns the record under key, nil when there is none.
	LoadLease(ctx context.Context, key string) ([]byte, error)
	// SwapLease stores rec under key for ttl and returns the record it
	// replaced (nil when none): one caller, on one replica, gets each
	// record back, so a lease is revoked by exactly one.
	SwapLease(ctx context.Context, key string, rec []byte, ttl time.Duration) ([]byte, error)
	// UpdateLease replaces old with rec (a renewal) only when old is still
	// the record under key; it reports whether it did.
	UpdateLease(ctx context.Context, key string, old, rec []byte, ttl time.Duration) (bool, error)
	// DueLeases returns up to limit keys whose claim said their
	// invocation ends by now (ClaimLease's deadline), for any replica to
	// end: the one that obtained a lease may be gone. A key stays listed
	// until ForgetLease.
	DueLeases(ctx context.Context, now time.Time, limit int) ([]string, error)
	// ForgetLease takes key off the deadline list.
	ForgetLease(ctx context.Context, key string) error
	// DeferLease lists key as due at at (again): an owed revocation any
	// replica retries from then, should the one that owes it be gone.
	DeferLease(ctx context.Context, key string, at time.Time) error
}

var (
	_ LeaseStore = (*MemoryStore)(nil)
	_ LeaseStore = (*RedisStore)(nil)
)

// memLease is one lease record in the memory store.
type memLease struct {
	rec     []byte
	expires time.Time
}

// leaseLocked returns the live record under key (the caller holds s.mu).
func (s *MemoryStore) leaseLocked(key string) []byte {
	l, ok := s.leases[key]
	if !ok {
		return nil
	}
	if !s.now().Before(l.expires) {
		delete(s.leases, key)
		return nil
	}
	return l.rec
}

// ClaimLease implements LeaseStore.
func (s *MemoryStore) ClaimLease(_ context.Context, key string, rec []byte, _ time.Time, ttl time.Duration) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.leaseLocked(key); cur != nil {
		return cur, false, nil
	}
	s.putLeaseLocked(key, rec, ttl)
	return rec, true, nil
}

// DueLeases implements LeaseStore. In one process the replica that
// obtained a lease is the only one, and ends it itself: nothing is due.
func (s *MemoryStore) DueLeases(context.Context, time.Time, int) ([]string, error) { return nil, nil }

// ForgetLease implements LeaseStore.
func (s *MemoryStore) ForgetLease(context.Context, string) error { return nil }

// DeferLease implements LeaseStore: the one process retries its own.
func (s *MemoryStore) DeferLease(context.Context, string, time.Time) error { return nil }

// LoadLease implements LeaseStore.
func (s *MemoryStore) LoadLease(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseLocked(key), nil
}

// SwapLease implements LeaseStore.
func (s *MemoryStore) SwapLease(_ context.Context, key string, rec []byte, ttl time.Duration) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.leaseLocked(key)
	s.putLeaseLocked(key, rec, ttl)
	return old, nil
}

// UpdateLease implements LeaseStore.
func (s *MemoryStore) UpdateLease(_ context.Context, key string, old, rec []byte, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.leaseLocked(key); cur == nil || !bytes.Equal(cur, old) {
		return false, nil
	}
	s.putLeaseLocked(key, rec, ttl)
	return true, nil
}

func (s *MemoryStore) putLeaseLocked(key string, rec []byte, ttl time.Duration) {
	if s.leases == nil {
		s.leases = map[string]memLease{}
	}
	s.leases[key] = memLease{rec: bytes.Clone(rec), expires: s.now().Add(ttl)}
}

// sweepLeasesLocked drops lease records past their time.
func (s *MemoryStore) sweepLeasesLocked(now time.Time) {
	for k, l := range s.leases {
		if !now.Before(l.expires) {
			delete(s.leases, k)
		}
	}
}
