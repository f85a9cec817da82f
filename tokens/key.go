package tokens

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signing algorithms, as JWS alg values.
const (
	EdDSA = "EdDSA" // Ed25519; the default
	ES256 = "ES256" // ECDSA P-256 with SHA-256
)

// Key is one signing key of a ring. ID is the RFC 7638 thumbprint of the
// public key, so every replica derives the same kid from the same key.
type Key struct {
	ID        string
	Algorithm string
	Created   time.Time
	// Retired is when the key stopped signing; zero while it may sign.
	Retired time.Time

	signer crypto.Signer
	public crypto.PublicKey
	hdr    string // encoded JWS header, computed once
}

// GenerateKey makes a new key for alg (EdDSA or ES256).
func GenerateKey(alg string, now time.Time) (*Key, error) {
	var signer crypto.Signer
	switch alg {
	case EdDSA:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate Ed25519 key: %w", err)
		}
		signer = priv
	case ES256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate P-256 key: %w", err)
		}
		signer = priv
	default:
		return nil, fmt.Errorf("%w: %q is not EdDSA or ES256", ErrAlgorithm, alg)
	}
	return newKey(signer, now.UTC().Truncate(time.Second))
}

func newKey(signer crypto.Signer, created time.Time) (*Key, error) {
	k := &Key{Created: created, signer: signer, public: signer.Public()}
	switch pub := k.public.(type) {
	case ed25519.PublicKey:
		k.Algorithm = EdDSA
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA keys must use P-256", ErrAlgorithm)
		}
		k.Algorithm = ES256
	default:
		return nil, fmt.Errorf("%w: key type %T is not Ed25519 or ECDSA P-256", ErrAlgorithm, pub)
	}
	k.ID = k.JWK().Thumbprint()
	k.hdr = k.encodeHeader()
	return k, nil
}

// parsePKCS8 turns a DER private key into a Key.
func parsePKCS8(der []byte, created, retired time.Time) (*Key, error) {
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("private key is not valid PKCS #8")
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key cannot sign")
	}
	k, err := newKey(signer, created)
	if err != nil {
		return nil, err
	}
	k.Retired = retired
	return k, nil
}

func (k *Key) pkcs8() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(k.signer) }

// Public returns the verification key.
func (k *Key) Public() crypto.PublicKey { return k.public }

// usableAt reports whether the key may still verify at now: it has not been
// retired, or it was retired less than retention ago.
func (k *Key) usableAt(now time.Time, retention time.Duration) bool {
	return k.Retired.IsZero() || now.Before(k.Retired.Add(retention))
}

// JWK is the public half of a key as a JSON Web Key (RFC 7517, 8037).
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	Y         string `json:"y,omitempty"`
	KeyID     string `json:"kid,omitempty"`
	Algorithm string `json:"alg,omitempty"`
	Use       string `json:"use,omitempty"`
}

// JWK returns the key's public JWK.
func (k *Key) JWK() JWK {
	j := JWK{KeyID: k.ID, Algorithm: k.Algorithm, Use: "sig"}
	b64 := base64.RawURLEncoding.EncodeToString
	switch pub := k.public.(type) {
	case ed25519.PublicKey:
		j.KeyType, j.Curve, j.X = "OKP", "Ed25519", b64(pub)
	case *ecdsa.PublicKey:
		raw, _ := pub.Bytes() // uncompressed point: 0x04 || X || Y
		j.KeyType, j.Curve = "EC", "P-256"
		j.X, j.Y = b64(raw[1:33]), b64(raw[33:65])
	}
	return j
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of the JWK, base64url.
func (j JWK) Thumbprint() string {
	// Members in lexicographic order, no whitespace (RFC 7638 section 3).
	var canon string
	switch j.KeyType {
	case "OKP":
		canon = fmt.Sprintf(`{"crv":%q,"kty":%q,"x":%q}`, j.Curve, j.KeyType, j.X)
	default:
		canon = fmt.Sprintf(`{"crv":%q,"kty":%q,"x":%q,"y":%q}`, j.Curve, j.KeyType, j.X, j.Y)
	}
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// PublicKey decodes the JWK into a verification key and checks that its
// kid, when present, is its thumbprint.
func (j JWK) PublicKey() (crypto.PublicKey, string, error) {
	dec := base64.RawURLEncoding.DecodeString
	var pub crypto.PublicKey
	var alg string
	switch {
	case j.KeyType == "OKP" && j.Curve == "Ed25519":
		x, err := dec(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, "", errors.New("JWK: bad Ed25519 x")
		}
		pub, alg = ed25519.PublicKey(x), EdDSA
	case j.KeyType == "EC" && j.Curve == "P-256":
		x, errX := dec(j.X)
		y, errY := dec(j.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, "", errors.New("JWK: bad P-256 coordinates")
		}
		point := append(append([]byte{4}, x...), y...)
		ec, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return nil, "", errors.New("JWK: P-256 point is not on the curve")
		}
		pub, alg = ec, ES256
	default:
		return nil, "", errors.New("JWK: key type is not OKP/Ed25519 or EC/P-256")
	}
	if j.Algorithm != "" && j.Algorithm != alg {
		return nil, "", errors.New("JWK: alg does not match the key type")
	}
	if j.KeyID != "" && j.KeyID != j.Thumbprint() {
		return nil, "", errors.New("JWK: kid is not the key's RFC 7638 thumbprint")
	}
	return pub, alg, nil
}

// JWKS is a JSON Web Key Set.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// storedKey is a key as a shared source (Vault) stores it.
type storedKey struct {
	PrivateKey []byte    `json:"private_key"` // PKCS #8 DER (base64 in JSON)
	Created    time.Time `json:"created_at"`
	Retired    time.Time `json:"retired_at,omitzero"`
}

func marshalKeys(keys []*Key) ([]byte, error) {
	out := make([]storedKey, 0, len(keys))
	for _, k := range keys {
		der, err := k.pkcs8()
		if err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.ID, err)
		}
		out = append(out, storedKey{PrivateKey: der, Created: k.Created, Retired: k.Retired})
	}
	return json.Marshal(out)
}

func unmarshalKeys(data []byte) ([]*Key, error) {
	var in []storedKey
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, errors.New("stored key set is not valid JSON")
	}
	keys := make([]*Key, 0, len(in))
	for i, s := range in {
		k, err := parsePKCS8(s.PrivateKey, s.Created, s.Retired)
		if err != nil {
			return nil, fmt.Errorf("stored key %d: %w", i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (k *Key) header() string { return k.hdr }

// encodeHeader builds the key's encoded JWS protected header.
func (k *Key) encodeHeader() string {
	h, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{k.Algorithm, k.ID, "JWT"})
	return base64.RawURLEncoding.EncodeToString(h)
}

// maxSignatureSize is the largest signature a ring key makes (Ed25519
// and ES256 both make 64 bytes).
const maxSignatureSize = 64

// signBytes signs a JWS signing input.
func (k *Key) signBytes(input []byte) ([]byte, error) {
	if priv, ok := k.signer.(ed25519.PrivateKey); ok {
		return ed25519.Sign(priv, input), nil
	}
	sig, err := jwt.SigningMethodES256.Sign(string(input), k.signer)
	return sig, err
}

// verifyBytes checks a signature over a JWS signing input with a public
// key of the given algorithm.
func verifyBytes(alg string, pub crypto.PublicKey, input, sig []byte) bool {
	switch alg {
	case EdDSA:
		p, ok := pub.(ed25519.PublicKey)
		return ok && len(sig) == ed25519.SignatureSize && ed25519.Verify(p, input, sig)
	case ES256:
		return jwt.SigningMethodES256.Verify(string(input), sig, pub) == nil
	}
	return false
}
