package control_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
)

// The control API runs a call through the host's invoke path and streams
// its answer as NDJSON: progress events, then one outcome.
func ExampleNewHandler() {
	h := host.New(host.Options{Policy: policy.AllowAll()})
	defer h.Shutdown(context.Background())
	_ = addStub(h, "stub")
	srv := httptest.NewServer(control.NewHandler(h))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/invocations", "application/json",
		strings.NewReader(`{"plugin":"stub","method":"tool","input":{}}`))
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
