package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
)

// recordPorts is a control.Ports that records what the API passed on.
type recordPorts struct {
	set     []byte
	replace bool
	removed string
}

func (r *recordPorts) InstallPort(_ context.Context, set []byte, replace bool) (any, error) {
	if string(set) == "refuse me" {
		return nil, errors.New("descriptor set refused: a specific reason")
	}
	r.set, r.replace = set, replace
	return map[string]string{"name": "numinance.ports.notes.v1"}, nil
}

func (r *recordPorts) RemovePort(_ context.Context, name string) (any, error) {
	r.removed = name
	return map[string]string{"name": name}, nil
}

func (r *recordPorts) ListPorts(context.Context) (any, error) {
	return map[string]any{"ports": []string{"numinance.ports.tickets.v1"}}, nil
}

// POST /v1/ports takes the set as base64 or as a path the host reads,
// never both; DELETE takes a port name only; each refusal is specific.
func TestPortRoutes(t *testing.T) {
	h := host.New(host.Options{})
	defer h.Shutdown(context.Background())
	ctl := control.NewHandler(h)
	rec := &recordPorts{}
	ctl.EnablePorts(rec)
	ctl.SetOperator(func(host.Principal) bool { return true })
	srv := httptest.NewServer(asOperator(ctl))
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	file := filepath.Join(t.TempDir(), "set.binpb")
	os.WriteFile(file, []byte("from a file"), 0o600)
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"base64", "POST", "/v1/ports", `{"set":"ZnJvbSBiYXNlNjQ=","replace":true}`, 200, "numinance.ports.notes.v1"},
		{"path", "POST", "/v1/ports", `{"path":"` + file + `"}`, 200, "numinance.ports.notes.v1"},
		{"both", "POST", "/v1/ports", `{"set":"eA==","path":"` + file + `"}`, 400, "bad_request"},
		{"neither", "POST", "/v1/ports", `{}`, 400, "bad_request"},
		{"unknown field", "POST", "/v1/ports", `{"set":"eA==","force":true}`, 400, "bad_request"},
		{"bad base64", "POST", "/v1/ports", `{"set":"%%%"}`, 400, "set: not standard base64"},
		{"relative path", "POST", "/v1/ports", `{"path":"set.binpb"}`, 400, "path: must be absolute"},
		{"missing file", "POST", "/v1/ports", `{"path":"/nonexistent/set.binpb"}`, 422, "install_failed"},
		{"refused", "POST", "/v1/ports", `{"set":"cmVmdXNlIG1l"}`, 422, "a specific reason"},
		{"list", "GET", "/v1/ports", "", 200, "numinance.ports.tickets.v1"},
		{"remove", "DELETE", "/v1/ports/numinance.ports.notes.v1", "", 200, "numinance.ports.notes.v1"},
		{"remove a bad name", "DELETE", "/v1/ports/notes", "", 400, "the name must be numinance.ports."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(tc.method, tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.code, tc.want)
			}
		})
	}
	if string(rec.set) != "from a file" || rec.replace || rec.removed != "numinance.ports.notes.v1" {
		t.Fatalf("passed on: %q %v %q", rec.set, rec.replace, rec.removed)
	}
	var got struct{ Ports []string }
	_, body := do("GET", "/v1/ports", "")
	if json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&got) != nil || len(got.Ports) != 1 {
		t.Fatalf("list: %s", body)
	}
}
