package broker

import (
	"context"
	"time"
)

// Store keeps grants under their handle's hash, with the indexes that
// revocation needs. Implementations never see a handle.
type Store interface {
	// Put stores g under k. It refuses with ErrInvocationRevoked when g's
	// invocation was revoked, or its plugin was revoked at or after
	// g.IssuedAt (an issue that raced with the revocation), and with
	// ErrIssueLimit when the invocation already holds maxPerInvocation
	// grants. Nothing is stored when it fails.
	Put(ctx context.Context, k HandleKey, g *Grant, maxPerInvocation int) error
	// Get returns the grant stored under k: ErrHandleUnknown when there is
	// none; ErrHandleRevoked (with the grant, for the audit log) when it
	// was revoked. Expiry is the caller's to check.
	Get(ctx context.Context, k HandleKey) (*Grant, error)
	// RevokeInvocation revokes every grant of the invocation and refuses
	// later ones; it returns how many live grants it revoked.
	RevokeInvocation(ctx context.Context, invocationID string) (int, error)
	// RevokePlugin revokes every grant of every invocation of the plugin
	// issued at or before at, and refuses to store one issued by then;
	// grants issued later (a restarted plugin) are unaffected, so a
	// revocation written again later covers what it covered at first.
	RevokePlugin(ctx context.Context, pluginID string, at time.Time) (int, error)
	// Ping reports whether the store can serve.
	Ping(ctx context.Context) error
	// Find returns the key and grant whose key starts with the
	// fingerprint (the first bytes of the key, hex), with Get's errors.
	// For operators: it may scan.
	Find(ctx context.Context, fingerprint string) (HandleKey, *Grant, error)
	// RevokeKey revokes one grant; it reports whether a live one was.
	RevokeKey(ctx context.Context, k HandleKey) (bool, error)
	// Renew replaces the live grant under k with g, the same grant with a
	// later ExpiresAt (a renewed pass), on every replica sharing the
	// store: ErrHandleUnknown or ErrHandleRevoked as Get, and then
	// nothing changes.
	Renew(ctx context.Context, k HandleKey, g *Grant) error
}

var (
	_ Store = (*MemoryStore)(nil)
	_ Store = (*RedisStore)(nil)
)
