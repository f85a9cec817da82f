package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

func parseHost(t *testing.T, hostYAML string) *Config {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	c, err := Parse([]byte("version: v1\nhost:\n" + hostYAML))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// host.control_principals is decoded strictly and validated as a whole:
// every problem named by its key.
func TestControlPrincipalsValidate(t *testing.T) {
	good := `  control: 127.0.0.1:7443
  control_tls: {cert_file: /c.pem, key_file: /k.pem, client_ca_file: /ca.pem, id_from: subject_cn}
  control_principals:
    tokens:
      - {principal: alice, file: /etc/airlock/alice.token}
      - {principal: ci.bot@example, file: /etc/airlock/ci.token}
    jwt:
      issuer: https://idp.example.com
      audience: airlock-control
      jwks_url: https://idp.example.com/jwks
      attributes: [email, groups]
      leeway: 1m
`
	if err := parseHost(t, good).Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"bad id_from", "  control: 127.0.0.1:7443\n  control_tls: {cert_file: /c, key_file: /k, client_ca_file: /ca, id_from: email}\n",
			"host.control_tls.id_from"},
		{"principal name with a colon", "  control_principals:\n    tokens: [{principal: \"jwt:x\", file: /a}]\n",
			"host.control_principals.tokens[0].principal"},
		{"reserved name", "  control_principals:\n    tokens: [{principal: control-token, file: /a}]\n", "control token's principal"},
		{"relative token file", "  control_principals:\n    tokens: [{principal: alice, file: alice.token}]\n",
			"host.control_principals.tokens[0].file: must be an absolute path"},
		{"two tokens, one principal", "  control_principals:\n    tokens: [{principal: a, file: /a}, {principal: a, file: /b}]\n",
			"tokens[1].principal: a second token"},
		{"peer with uid and user", "  control_principals:\n    peers: [{uid: 0, user: root, principal: root-operator}]\n",
			"peers[0]: exactly one of uid and user"},
		{"peers over TCP", "  control: 127.0.0.1:7443\n  control_token_file: /t\n  control_principals:\n    peers: [{uid: 0, principal: r}]\n",
			"host.control_principals.peers: only for a unix control socket"},
		{"jwt without audience", "  control_principals:\n    jwt: {issuer: https://idp.example, jwks_url: https://idp.example/k}\n",
			"host.control_principals.jwt.audience: required"},
		{"jwt over http", "  control_principals:\n    jwt: {issuer: http://idp.example, audience: a, jwks_url: http://idp.example/k}\n",
			"host.control_principals.jwt.jwks_url: must be https"},
		{"jwt with two key sources", "  control_principals:\n    jwt: {issuer: https://i, audience: a, jwks_url: https://i/k, jwks_file: /k}\n",
			"jwks_url, jwks_file: exactly one"},
		{"jwt leeway", "  control_principals:\n    jwt: {issuer: https://i, audience: a, jwks_file: /k, leeway: 1h}\n",
			"jwt.leeway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseHost(t, tc.yaml).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Loopback http is allowed (a test's issuer), and a TCP control API
	// may rely on principals' tokens alone on loopback.
	loop := "  control: 127.0.0.1:7443\n  control_principals:\n    tokens: [{principal: a, file: /a}]\n" +
		"    jwt: {issuer: \"http://127.0.0.1:9/\", audience: a, jwks_url: \"http://localhost:9/jwks\"}\n"
	if err := parseHost(t, loop).Validate(); err != nil {
		t.Fatalf("loopback issuer refused: %v", err)
	}
	if _, err := Parse([]byte("version: v1\nhost:\n  control_principals:\n    jwt: {issuer: https://i, audiences: [a]}\n")); err == nil {
		t.Fatal("an unknown key under jwt accepted")
	}
}

// check-config reads the principals' token files and the JWKS file as
// the host will: a missing or open token file and a JWKS with no usable
// key are named by their keys.
func TestControlPrincipalsCheckFiles(t *testing.T) {
	dir := t.TempDir()
	good, open, short := filepath.Join(dir, "good.token"), filepath.Join(dir, "open.token"), filepath.Join(dir, "short.token")
	os.WriteFile(good, []byte(peerauth.NewSecret()), 0o600)
	os.WriteFile(open, []byte(peerauth.NewSecret()), 0o644)
	os.WriteFile(short, []byte("abc"), 0o600)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	goodJWKS, badJWKS := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(goodJWKS, jwks, 0o644)
	os.WriteFile(badJWKS, []byte(`{"keys":[{"kty":"oct","k":"AAAA"}]}`), 0o644)

	c := parseHost(t, "  control_principals:\n    tokens:\n"+
		"      - {principal: a, file: "+good+"}\n      - {principal: b, file: "+open+"}\n"+
		"      - {principal: c, file: "+short+"}\n      - {principal: d, file: "+filepath.Join(dir, "missing")+"}\n"+
		"    jwt: {issuer: https://i, audience: a, jwks_file: "+badJWKS+"}\n")
	err := c.CheckFilesOf(ScopeHost)
	for _, want := range []string{"tokens[1].file: readable by others", "tokens[2].file", "tokens[3].file: missing",
		"host.control_principals.jwt.jwks_file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err lacks %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "tokens[0]") {
		t.Errorf("a good token file refused: %v", err)
	}
	c.Host.ControlPrincipals.Tokens = c.Host.ControlPrincipals.Tokens[:1]
	c.Host.ControlPrincipals.JWT.JWKSFile = goodJWKS
	if err := c.CheckFilesOf(ScopeHost); err != nil && strings.Contains(err.Error(), "control_principals") {
		t.Fatalf("good files refused: %v", err)
	}
}
