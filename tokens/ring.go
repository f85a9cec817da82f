package tokens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/internal/health"
	"github.com/airlock-dev/airlock/internal/serve"
)

// RingOptions configure a Ring. Zero values take the defaults.
type RingOptions struct {
	// Algorithm of the keys the ring generates: EdDSA (default) or ES256.
	Algorithm string
	// Retention is how long a retired key keeps verifying: it must cover
	// the longest token lifetime plus verification leeway.
	Retention time.Duration
	// RotateEvery rotates the active key once it is this old; 0 = never.
	RotateEvery time.Duration
	// MinRefresh is the least time between reloads of the source caused
	// by unknown kids (so a flood of bogus kids costs one read).
	MinRefresh time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// DefaultMinRefresh is the default for RingOptions.MinRefresh.
const DefaultMinRefresh = 5 * time.Second

// Ring holds one active signing key and the retired keys that may still
// verify, backed by a KeySource.
type Ring struct {
	src  KeySource
	opts RingOptions

	writeMu sync.Mutex // serialises Refresh/Rotate
	snap    atomic.Pointer[ringSnapshot]
	lastRef atomic.Int64 // unix nanos of the last refresh
	reload  health.Reload
}

type ringSnapshot struct {
	version string
	active  *Key
	keys    []*Key // every stored key, newest first
	byID    map[string]*Key
}

// NewRing loads the ring from src, creating and saving a first key when
// the source is empty.
func NewRing(ctx context.Context, src KeySource, opts RingOptions) (*Ring, error) {
	r, err := NewPendingRing(src, opts)
	if err != nil {
		return nil, err
	}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	if r.snap.Load().active == nil {
		// Replicas started together on an empty source race here:
		// check-and-set lets one win, and the others adopt its key
		// instead of rotating on top of it.
		r.writeMu.Lock()
		_, err := r.rotateLocked(ctx, true)
		r.writeMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// NewPendingRing returns a ring that holds no key yet, for a process
// that starts while src cannot be read (Vault down): Active is nil and
// nothing verifies until RotateIfDue (which Run calls) loads src, or
// creates and saves the first key when src is empty. It fails only for
// bad options.
func NewPendingRing(src KeySource, opts RingOptions) (*Ring, error) {
	if opts.Algorithm == "" {
		opts.Algorithm = EdDSA
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinRefresh == 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.Algorithm != EdDSA && opts.Algorithm != ES256 {
		return nil, fmt.Errorf("%w: %q is not EdDSA or ES256", ErrAlgorithm, opts.Algorithm)
	}
	r := &Ring{src: src, opts: opts}
	r.install(KeySet{})
	return r, nil
}

// Active returns the key that signs now, or nil if there is none.
func (r *Ring) Active() *Key { return r.snap.Load().active }

// Version is the stored version of the key set the ring holds.
func (r *Ring) Version() string { return r.snap.Load().version }

// Keys returns the keys that may verify now, newest first.
func (r *Ring) Keys() []*Key {
	s, now := r.snap.Load(), r.opts.Now()
	out := make([]*Key, 0, len(s.keys))
	for _, k := range s.keys {
		if k.usableAt(now, r.opts.Retention) {
			out = append(out, k)
		}
	}
	return out
}

// JWKS returns the public keys that may verify now.
func (r *Ring) JWKS() JWKS {
	keys := r.Keys()
	out := JWKS{Keys: make([]JWK, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.JWK())
	}
	return out
}

// lookup finds a key that may verify now, without touching the source.
func (r *Ring) lookup(kid string) (*Key, bool) {
	k, ok := r.snap.Load().byID[kid]
	if !ok || !k.usableAt(r.opts.Now(), r.opts.Retention) {
		return nil, false
	}
	return k, true
}

// VerificationKey implements KeyResolver: an unknown kid reloads the
// source (at most once per MinRefresh), since another replica may have
// rotated.
func (r *Ring) VerificationKey(ctx context.Context, kid string) (VerificationKey, error) {
	if k, ok := r.lookup(kid); ok {
		return VerificationKey{Algorithm: k.Algorithm, Key: k.public}, nil
	}
	if r.MaybeRefresh(ctx) {
		if k, ok := r.lookup(kid); ok {
			return VerificationKey{Algorithm: k.Algorithm, Key: k.public}, nil
		}
	}
	return VerificationKey{}, ErrUnknownKey
}

// MaybeRefresh reloads the source unless that was done less than
// MinRefresh ago, and reports whether it reloaded. Callers driven by
// requests (an unknown kid, a JWKS fetch) use it so that a flood of
// requests costs at most one source read per MinRefresh.
func (r *Ring) MaybeRefresh(ctx context.Context) bool {
	// Rate limiting is about real time, not the (injectable) token clock.
	last := time.Unix(0, r.lastRef.Load())
	if time.Since(last) < r.opts.MinRefresh {
		return false
	}
	err := r.Refresh(ctx)
	r.reload.Record(err)
	if err != nil {
		r.opts.Logger.Warn("reload signing keys", "err", err)
		return false
	}
	return true
}

// Reload is the state of the periodic reload (Run) and of reloads for
// unknown kids: its error while the source cannot be read or written
// (the ring keeps signing with the keys it holds), and a count of
// failures. airlock serve is not ready while it fails.
func (r *Ring) Reload() *health.Reload { return &r.reload }

// Refresh reloads the key set from the source.
func (r *Ring) Refresh(ctx context.Context) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	return r.refreshLocked(ctx)
}

func (r *Ring) refreshLocked(ctx context.Context) error {
	r.lastRef.Store(time.Now().UnixNano())
	set, err := r.src.Load(ctx)
	if err != nil {
		return err
	}
	if cur := r.snap.Load(); len(set.Keys) == 0 && cur != nil && cur.active != nil {
		// The source came back empty (the secret was deleted, or Vault
		// lost its data): never drop the keys this replica holds — tokens
		// they signed must keep verifying and minting must go on. Publish
		// them again instead.
		held := KeySet{Keys: cur.keys, Version: set.Version}
		if err := r.src.Save(ctx, held); err != nil {
			r.opts.Logger.Error("signing keys: the key source is empty and re-publishing the held keys failed; keeping them",
				"err", err, "kid", cur.active.ID)
			return nil
		}
		r.opts.Logger.Warn("signing keys: the key source was empty; re-published the held keys", "kid", cur.active.ID)
		if set, err = r.src.Load(ctx); err != nil || len(set.Keys) == 0 {
			return nil
		}
	}
	r.install(set)
	return nil
}

func (r *Ring) install(set KeySet) {
	keys := slices.Clone(set.Keys)
	// Newest first; the active key is the newest one not retired.
	slices.SortStableFunc(keys, func(a, b *Key) int { return b.Created.Compare(a.Created) })
	s := &ringSnapshot{version: set.Version, keys: keys, byID: make(map[string]*Key, len(keys))}
	for _, k := range keys {
		s.byID[k.ID] = k
		if s.active == nil && k.Retired.IsZero() {
			s.active = k
		}
	}
	r.snap.Store(s)
}

// Rotate generates a new active key, retires the previous one, drops keys
// retired past their retention, and saves with check-and-set. If another
// replica saved first, Rotate adopts that replica's set when it already
// holds a fresh key, and otherwise retries on top of it.
func (r *Ring) Rotate(ctx context.Context) (*Key, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	return r.rotateLocked(ctx, false)
}

// RotateIfDue rotates when the active key is older than RotateEvery (or
// there is none). Every replica may call it on a timer: check-and-set
// makes one of them win and the others adopt its key.
func (r *Ring) RotateIfDue(ctx context.Context) (bool, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	if err := r.refreshLocked(ctx); err != nil {
		return false, err
	}
	if !r.dueLocked() {
		return false, nil
	}
	_, err := r.rotateLocked(ctx, true)
	return err == nil, err
}

func (r *Ring) dueLocked() bool {
	a := r.snap.Load().active
	if a == nil {
		return true
	}
	return r.opts.RotateEvery > 0 && !r.opts.Now().Before(a.Created.Add(r.opts.RotateEvery))
}

func (r *Ring) rotateLocked(ctx context.Context, onlyIfDue bool) (*Key, error) {
	for attempt := 0; attempt < 3; attempt++ {
		cur := r.snap.Load()
		now := r.opts.Now()
		k, err := GenerateKey(r.opts.Algorithm, now)
		if err != nil {
			return nil, err
		}
		next := []*Key{k}
		for _, old := range cur.keys {
			o := *old
			if o.Retired.IsZero() {
				o.Retired = k.Created
			}
			if o.usableAt(now, r.opts.Retention) {
				next = append(next, &o)
			}
		}
		err = r.src.Save(ctx, KeySet{Keys: next, Version: cur.version})
		if err == nil {
			if rerr := r.refreshLocked(ctx); rerr != nil {
				return nil, fmt.Errorf("reload after rotation: %w", rerr)
			}
			if cur.active == nil {
				r.opts.Logger.Info("signing key created", "kid", k.ID, "alg", k.Algorithm)
			} else {
				r.opts.Logger.Info("signing key rotated", "kid", k.ID, "alg", k.Algorithm, "previous_kid", cur.active.ID)
			}
			return k, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, err
		}
		// Another replica wrote first: take its set and decide again.
		if err := r.refreshLocked(ctx); err != nil {
			return nil, err
		}
		if onlyIfDue && !r.dueLocked() {
			return r.snap.Load().active, nil
		}
	}
	return nil, fmt.Errorf("rotate signing key: %w (gave up after 3 attempts)", ErrConflict)
}

// Run reloads the source every refresh interval and rotates when due,
// until ctx ends.
func (r *Ring) Run(ctx context.Context, refresh time.Duration) {
	if refresh <= 0 {
		return
	}
	serve.Every(ctx, refresh, func(time.Time) { r.reloadOnce(ctx) })
}

// reloadOnce is one tick of Run: reload, rotate when due, record.
func (r *Ring) reloadOnce(ctx context.Context) {
	_, err := r.RotateIfDue(ctx)
	if ctx.Err() != nil {
		return
	}
	r.reload.Record(err)
	if err != nil {
		r.opts.Logger.Warn("signing key refresh failed; signing on with the keys held", "err", err)
	}
}
