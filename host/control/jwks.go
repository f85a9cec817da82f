package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/airlock-dev/airlock/tokens"
)

// JWKS refresh bounds.
const (
	// DefaultJWKSMaxAge: a fetched key set is fetched again after this
	// long, so a key the issuer retired stops verifying.
	DefaultJWKSMaxAge = 15 * time.Minute
	// DefaultJWKSMinRefresh: an unknown kid fetches the set again at most
	// this often, so bogus kids cannot turn the host into a request
	// amplifier against the issuer.
	DefaultJWKSMinRefresh = 30 * time.Second
	// maxJWKS bounds a key set's size.
	maxJWKS = 1 << 20
	// jwksRetryUnloaded: while no set was ever loaded, requests fetch it
	// at most this often.
	jwksRetryUnloaded = time.Second
	// jwksFetchTimeout bounds one fetch.
	jwksFetchTimeout = 10 * time.Second
)

// JWKS is an OIDC issuer's key set, read from a URL or a file: fetched at
// first use, again after MaxAge, and when a token names a kid it does not
// hold (at most once per MinRefresh). A failed fetch keeps the last good
// set; with none, verification fails with tokens.ErrKeysUnavailable.
// Make it with NewJWKS; it is safe for concurrent use.
type JWKS struct {
	url, file  string
	client     *http.Client
	maxAge     time.Duration
	minRefresh time.Duration
	now        func() time.Time

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	loaded  bool
	fetched time.Time // last attempt
	good    time.Time // last success
}

// JWKSOptions say where a JWKS comes from: URL (http(s)) or File.
type JWKSOptions struct {
	URL, File string
	// Client fetches URL; one with a 10s timeout when nil.
	Client *http.Client
	// MaxAge and MinRefresh: DefaultJWKSMaxAge and DefaultJWKSMinRefresh
	// when zero.
	MaxAge, MinRefresh time.Duration
	Now                func() time.Time
}

// NewJWKS returns the key set o names; nothing is fetched yet.
func NewJWKS(o JWKSOptions) (*JWKS, error) {
	if (o.URL == "") == (o.File == "") {
		return nil, errors.New("exactly one of jwks_url and jwks_file is required")
	}
	k := &JWKS{url: o.URL, file: o.File, client: o.Client, maxAge: o.MaxAge, minRefresh: o.MinRefresh, now: o.Now}
	if k.client == nil {
		k.client = &http.Client{Timeout: jwksFetchTimeout}
	}
	if k.maxAge == 0 {
		k.maxAge = DefaultJWKSMaxAge
	}
	if k.minRefresh == 0 {
		k.minRefresh = DefaultJWKSMinRefresh
	}
	if k.now == nil {
		k.now = time.Now
	}
	return k, nil
}

// Check loads the key set once and says whether it holds a key that can
// verify (airlock check-config, and the host at start).
func (k *JWKS) Check(ctx context.Context) error {
	keys, err := k.load(ctx)
	if err != nil {
		return err
	}
	for _, key := range keys {
		for _, alg := range JWTAlgorithms {
			if keyFits(key, string(alg)) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: the key set holds no RS256 (2048 bits or more), ES256 or EdDSA signing key", tokens.ErrKeysUnavailable)
}

// lookup returns the keys that kid names (every key when kid is empty),
// fetching the set when it is stale or does not know kid.
func (k *JWKS) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	stale := !k.loaded || now.Sub(k.good) >= k.maxAge
	found := match(k.keys, kid)
	if stale || len(found) == 0 {
		wait := k.minRefresh
		if !k.loaded {
			wait = jwksRetryUnloaded
		}
		if k.fetched.IsZero() || now.Sub(k.fetched) >= wait {
			k.fetched = now
			keys, err := k.load(ctx)
			switch {
			case err == nil:
				k.keys, k.loaded, k.good = keys, true, now
				found = match(k.keys, kid)
			case !k.loaded:
				return nil, err
			}
			// else: keep serving the last good set.
		}
		if !k.loaded {
			return nil, fmt.Errorf("%w: the last fetch failed; retried at most once a second", tokens.ErrKeysUnavailable)
		}
	}
	if len(found) == 0 {
		return nil, tokens.ErrUnknownKey
	}
	return found, nil
}

func match(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range keys {
		if kid == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// load reads the set; a key it cannot use is skipped, never the set.
// Only public halves are kept.
func (k *JWKS) load(ctx context.Context) ([]jose.JSONWebKey, error) {
	body, err := k.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", tokens.ErrKeysUnavailable, err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%w: the key set is not a JWKS (JSON with \"keys\")", tokens.ErrKeysUnavailable)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || !key.Valid() {
			continue
		}
		keys = append(keys, key.Public())
	}
	return keys, nil
}

func (k *JWKS) read(ctx context.Context) ([]byte, error) {
	if k.file != "" {
		f, err := os.Open(k.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readLimited(f)
	}
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, errors.New("the JWKS URL is not a URL")
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, errors.New("the JWKS URL cannot be fetched")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the JWKS URL answered %d", resp.StatusCode)
	}
	return readLimited(resp.Body)
}

func readLimited(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxJWKS+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKS {
		return nil, fmt.Errorf("the key set is larger than %d bytes", maxJWKS)
	}
	return b, nil
}
