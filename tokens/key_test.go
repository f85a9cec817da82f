package tokens

import (
	"crypto/ed25519"
	"encoding/base64"
	"testing"
	"time"
)

// RFC 8037 appendix A.3: the thumbprint of the example Ed25519 key.
func TestThumbprintRFC8037(t *testing.T) {
	j := JWK{KeyType: "OKP", Curve: "Ed25519", X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
	if got, want := j.Thumbprint(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("thumbprint = %s, want %s", got, want)
	}
}

// RFC 7638 section 3.1 is RSA; for EC, check that the kid round-trips
// through JWK decoding and that a wrong kid is refused.
func TestJWKRoundTrip(t *testing.T) {
	for _, alg := range []string{EdDSA, ES256} {
		k, err := GenerateKey(alg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		j := k.JWK()
		pub, gotAlg, err := j.PublicKey()
		if err != nil || gotAlg != alg {
			t.Fatalf("%s: PublicKey() alg=%s err=%v", alg, gotAlg, err)
		}
		if alg == EdDSA && !pub.(ed25519.PublicKey).Equal(k.Public()) {
			t.Fatalf("%s: decoded key differs", alg)
		}
		j.KeyID = "not-the-thumbprint"
		if _, _, err := j.PublicKey(); err == nil {
			t.Fatalf("%s: wrong kid accepted", alg)
		}
		j = k.JWK()
		j.Algorithm = "HS256"
		if _, _, err := j.PublicKey(); err == nil {
			t.Fatalf("%s: alg/key type mismatch accepted", alg)
		}
	}
}

func TestJWKRejectsBadKeys(t *testing.T) {
	tests := []struct {
		name string
		jwk  JWK
	}{
		{"short Ed25519", JWK{KeyType: "OKP", Curve: "Ed25519", X: base64.RawURLEncoding.EncodeToString(make([]byte, 31))}},
		{"RSA", JWK{KeyType: "RSA", Curve: "", X: "AQAB"}},
		{"P-384", JWK{KeyType: "EC", Curve: "P-384", X: "AA", Y: "AA"}},
		{"point not on curve", JWK{KeyType: "EC", Curve: "P-256",
			X: base64.RawURLEncoding.EncodeToString(make([]byte, 32)), Y: base64.RawURLEncoding.EncodeToString(make([]byte, 32))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := tt.jwk.PublicKey(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
