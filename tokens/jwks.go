package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JWKSPath is where the admin listener serves the key set.
const JWKSPath = "/.well-known/jwks.json"

// JWKSMaxAge is the Cache-Control max-age of the served key set. It is
// short because a rotated-in key signs at once; verifiers that see an
// unknown kid refetch anyway.
const JWKSMaxAge = 60 * time.Second

// JWKSHandler serves the ring's public keys with cache headers and an
// ETag. It reloads the ring first (at most once per MinRefresh), so a
// rotation by another replica or by `airlock token rotate` is published
// without waiting for the periodic refresh.
func JWKSHandler(r *Ring) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		r.MaybeRefresh(req.Context())
		body, err := json.Marshal(r.JWKS())
		if err != nil {
			http.Error(w, "encode key set", http.StatusInternalServerError)
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		h := w.Header()
		h.Set("Content-Type", "application/jwk-set+json")
		h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(JWKSMaxAge/time.Second)))
		h.Set("ETag", etag)
		if etagMatch(req.Header.Values("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}

// JWKSClient resolves verification keys from a JWKS URL. It fetches on
// first use, again when the cached set's max-age has passed, and when a
// kid is unknown — at most once per MinRefresh, so bogus kids cannot turn
// it into a request amplifier.
type JWKSClient struct {
	URL        string
	HTTPClient *http.Client  // http.DefaultClient when nil
	MinRefresh time.Duration // DefaultMinRefresh when zero
	Now        func() time.Time

	mu      sync.Mutex
	keys    map[string]VerificationKey
	fetched time.Time
	expires time.Time
}

// VerificationKey implements KeyResolver.
func (c *JWKSClient) VerificationKey(ctx context.Context, kid string) (VerificationKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	minRefresh := c.MinRefresh
	if minRefresh == 0 {
		minRefresh = DefaultMinRefresh
	}
	k, ok := c.keys[kid]
	stale := c.keys == nil || now.After(c.expires)
	if ok && !stale {
		return k, nil
	}
	if c.keys == nil || now.Sub(c.fetched) >= minRefresh || stale {
		if err := c.fetch(ctx, now); err != nil {
			if c.keys == nil {
				return VerificationKey{}, err
			}
			// Keep serving the last good set; an unknown kid stays unknown.
		}
		k, ok = c.keys[kid]
	}
	if !ok {
		return VerificationKey{}, ErrUnknownKey
	}
	return k, nil
}

func (c *JWKSClient) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *JWKSClient) fetch(ctx context.Context, now time.Time) error {
	c.fetched = now
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return fmt.Errorf("%w: bad JWKS URL", ErrKeysUnavailable)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKeysUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: JWKS endpoint answered %s", ErrKeysUnavailable, resp.Status)
	}
	body, err := readAllLimited(resp.Body, 1<<20)
	if err != nil {
		return fmt.Errorf("%w: read JWKS: %v", ErrKeysUnavailable, err)
	}
	var set JWKS
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("%w: JWKS is not valid JSON", ErrKeysUnavailable)
	}
	keys := make(map[string]VerificationKey, len(set.Keys))
	for _, j := range set.Keys {
		pub, alg, err := j.PublicKey()
		if err != nil {
			continue // a key we cannot use must not hide the others
		}
		keys[j.Thumbprint()] = VerificationKey{Algorithm: alg, Key: pub}
	}
	c.keys = keys
	c.expires = now.Add(maxAge(resp.Header.Get("Cache-Control")))
	return nil
}

// maxAge reads max-age from Cache-Control, bounded to [0, 1h].
func maxAge(cc string) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return min(time.Duration(n)*time.Second, time.Hour)
			}
		}
	}
	return 0
}

// etagMatch is RFC 9110's If-None-Match: "*", or a comma-separated list of
// entity tags compared weakly (W/"x" matches "x").
func etagMatch(headers []string, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for _, h := range headers {
		for _, t := range strings.Split(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == want {
				return true
			}
		}
	}
	return false
}
