package control_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/airlock-dev/airlock/host/control"
)

// A bearer JWT is untrusted input: whatever its bytes, Verify never
// panics and never names a principal without the issuer's key (the
// fuzzer holds none; the key set's private half is discarded).
func FuzzJWTVerify(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	file := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		f.Fatal(err)
	}
	keys, err := control.NewJWKS(control.JWKSOptions{File: file})
	if err != nil {
		f.Fatal(err)
	}
	v, err := control.NewJWTVerifier(control.JWTOptions{Issuer: "https://idp.example", Audience: "airlock", Keys: keys})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"", ".", "..", "a.b.c",
		b64(`{"alg":"none"}`) + "." + b64(`{"iss":"https://idp.example","aud":"airlock","sub":"x","exp":9999999999}`) + ".",
		b64(`{"alg":"ES256","kid":"k1"}`) + "." + b64(`{"iss":"https://idp.example","aud":"airlock","sub":"x","exp":9999999999}`) + "." + b64("sig"),
		b64(`{"alg":"HS256","kid":"k1"}`) + "." + b64(`{}`) + "." + b64("mac"),
		b64(`{"alg":"ES256","alg":"none"}`) + ".e30.",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if p, err := v.Verify(context.Background(), raw); err == nil {
			t.Fatalf("a token the fuzzer made named %q", p.ID)
		}
	})
}
