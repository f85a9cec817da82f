package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// apiHost is a host with one recording stub plugin ("stub") and its
// control API's handler, before authentication.
type apiHost struct {
	h   *host.Host
	ctl *control.Handler
	rec *recorder
}

func newAPIHost(t testing.TB) *apiHost { return newAPIHostLog(t, nil) }

// newAPIHostLog is newAPIHost logging to log (the invocations' audit
// lines).
func newAPIHostLog(t testing.TB, log *slog.Logger) *apiHost {
	t.Helper()
	h := host.New(host.Options{Policy: policy.AllowAll(), Log: log})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	rec, err := addRecordingStub(h, "stub")
	if err != nil {
		t.Fatal(err)
	}
	return &apiHost{h: h, ctl: control.NewHandler(h), rec: rec}
}

// writeToken writes a fresh token to a 0600 file named name and returns
// the token and the path.
func writeToken(t testing.TB, dir, name string) (string, string) {
	t.Helper()
	tok := peerauth.NewSecret()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tok, path
}

// answer is a control API answer: its status, and the error code of a
// refusal.
type answer struct {
	status int
	code   string
	body   string
}

// invoke posts body to /v1/invocations with bearer (none when empty).
func invoke(t testing.TB, c *http.Client, base, bearer, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/invocations", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return answer{status: resp.StatusCode, code: e.Error, body: string(b)}
}

const stubCall = `{"plugin":"stub","method":"tool","input":{}}`

// logTo returns a logger writing JSON lines into a buffer.
func logTo() (*slog.Logger, *testenv.SyncBuffer) {
	buf := &testenv.SyncBuffer{}
	return slog.New(slog.NewJSONHandler(buf, nil)), buf
}

// mustNotContain fails when the log holds any of secrets.
func mustNotContain(t testing.TB, log *testenv.SyncBuffer, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && bytes.Contains([]byte(log.String()), []byte(s)) {
			t.Fatalf("the log holds a credential the caller presented")
		}
	}
}
