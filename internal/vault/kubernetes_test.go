package vault

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Kubernetes login against a real Vault. Vault validates the service
// account token by calling the cluster's TokenReview API; a small TLS
// server plays that API here (the Vault side is real).
func TestKubernetesLogin(t *testing.T) {
	ctx := context.Background()
	var reviews atomic.Int32
	kube := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		reviews.Add(1)
		var in struct {
			Spec struct {
				Token string `json:"token"`
			} `json:"spec"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		ok := strings.Count(in.Spec.Token, ".") == 2
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
			"status": map[string]any{"authenticated": ok, "user": map[string]any{
				"username": "system:serviceaccount:airlock:airlock", "uid": "sa-uid-1",
				"groups": []string{"system:serviceaccounts", "system:serviceaccounts:airlock"}}},
		})
	}))
	defer kube.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kube.Certificate().Raw})

	v := testenv.NewVault(t)
	root := v.Client(t)
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, "kubernetes", &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	saJWT := serviceAccountJWT(t)
	if _, err := root.Logical().WriteWithContext(ctx, "auth/kubernetes/config", map[string]any{
		"kubernetes_host": kube.URL, "kubernetes_ca_cert": string(caPEM),
		"token_reviewer_jwt": saJWT, "disable_local_ca_jwt": true,
	}); err != nil {
		t.Fatal(err)
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "k8s-read", `path "secret/data/airlock/*" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "auth/kubernetes/role/airlock", map[string]any{
		"bound_service_account_names": "airlock", "bound_service_account_namespaces": "airlock",
		"token_policies": "k8s-read", "token_ttl": "1h",
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.KVv2("secret").Put(ctx, "airlock/demo", map[string]any{"token": "t"}); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(saJWT), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := Connect(ctx, Config{Address: v.Addr, Auth: AuthConfig{Method: AuthKubernetes, Role: "airlock",
		ServiceAccountTokenFile: tokenFile}}, nil)
	if err != nil {
		t.Fatalf("kubernetes login: %v", err)
	}
	if reviews.Load() == 0 {
		t.Fatal("Vault never asked the TokenReview API")
	}
	if _, err := c.API.KVv2("secret").Get(ctx, "airlock/demo"); err != nil {
		t.Fatalf("read with the kubernetes-issued token: %v", err)
	}

	if _, err := Connect(ctx, Config{Address: v.Addr, Auth: AuthConfig{Method: AuthKubernetes, Role: "nope",
		ServiceAccountTokenFile: tokenFile}}, nil); err == nil {
		t.Fatal("login with an unknown role succeeded")
	}
}

// serviceAccountJWT makes a token shaped like a Kubernetes service account
// token (Vault reads its claims; the TokenReview API vouches for it).
func serviceAccountJWT(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss":                                    "kubernetes/serviceaccount",
		"sub":                                    "system:serviceaccount:airlock:airlock",
		"kubernetes.io/serviceaccount/namespace": "airlock",
		"kubernetes.io/serviceaccount/secret.name":          "airlock-token",
		"kubernetes.io/serviceaccount/service-account.name": "airlock",
		"kubernetes.io/serviceaccount/service-account.uid":  "sa-uid-1",
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
