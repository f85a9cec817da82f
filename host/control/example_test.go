package control_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// The control API runs a call through the host's invoke path and streams
// its answer as NDJSON: progress events, then one outcome. Authenticate
// names the caller of every request first (here: a principal's token).
func ExampleNewHandler() {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	_ = addStub(h, "stub")
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	secret := peerauth.NewSecret()
	_ = os.WriteFile(filepath.Join(dir, "alice.token"), []byte(secret+"\n"), 0o600)
	srv := httptest.NewServer(control.Authenticate(control.NewHandler(h), control.AuthOptions{
		Tokens: []control.TokenFile{{Principal: "alice", File: filepath.Join(dir, "alice.token")}},
	}, nil))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/invocations",
		strings.NewReader(`{"plugin":"stub","method":"tool","input":{},"run_id":"run-1"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out = strings.ReplaceAll(string(b), "\n", "")
	fmt.Println(resp.StatusCode, strings.Contains(out, `"event":"outcome"`), strings.Contains(out, `"status":"STATUS_SUCCEEDED"`),
		strings.Contains(out, `"result":{"ok":true}`))
	// Output:
	// 200 true true true
}
