package tokens

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestJWKSHandlerAndClient(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, EdDSA)
	var hits atomic.Int32
	h := JWKSHandler(f.rng)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.Header.Get("Cache-Control") != "public, max-age=60" || etag == "" {
		t.Fatalf("cache headers: %v", resp.Header)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional GET = %d, want 304", resp.StatusCode)
	}

	client := &JWKSClient{URL: srv.URL, Now: f.clk.Now}
	v, err := NewVerifier(client, VerifierOptions{Now: f.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hits.Store(0)
	if _, err := v.VerifySampling(ctx, f.sampling(t)); err != nil {
		t.Fatalf("verify through JWKS: %v", err)
	}
	// Bogus kids do not each cause a fetch.
	other, _ := GenerateKey(EdDSA, f.clk.Now())
	for range 20 {
		if _, err := v.VerifySampling(ctx, forge(t, other, hdr(other), f.validClaims())); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
}

func TestJWKSClientUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	f := newFixture(t, EdDSA)
	v, _ := NewVerifier(&JWKSClient{URL: srv.URL}, VerifierOptions{Now: f.clk.Now})
	if _, err := v.VerifySampling(context.Background(), f.sampling(t)); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("err = %v, want ErrKeysUnavailable", err)
	}
}
