package control_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
)

// countInstaller is a control.Installer that counts its installs.
type countInstaller struct{ n int }

func (i *countInstaller) Install(context.Context, string) (any, error) {
	i.n++
	return map[string]string{"plugin": "x"}, nil
}

// Installing a plugin and installing or removing a port are operator
// acts: a principal that is no operator (a token-file or JWT principal)
// is refused 403 not_an_operator before anything is installed, as it is
// for issuing grants and releasing a quarantined plugin. Listing ports
// stays open to every principal.
func TestInstallRoutesAreOperatorOnly(t *testing.T) {
	h := host.New(host.Options{})
	defer h.Shutdown(context.Background())
	ctl := control.NewHandler(h)
	ports, inst := &recordPorts{}, &countInstaller{}
	ctl.EnablePorts(ports)
	ctl.EnableInstall(inst)
	ctl.SetOperator(func(p host.Principal) bool { return p.ID == "ops" })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := host.Principal{ID: r.Header.Get("X-Test-Principal"), Method: control.MethodToken}
		ctl.ServeHTTP(w, r.WithContext(control.WithCaller(r.Context(), p)))
	}))
	defer srv.Close()
	do := func(who, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Test-Principal", who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/plugins", `{"dir":"/nonexistent/pkg"}`},
		{"POST", "/v1/ports", `{"set":"eA==","replace":true}`},
		{"DELETE", "/v1/ports/numinance.ports.notes.v1", ""},
	}
	for _, rt := range routes {
		if code, body := do("agent", rt.method, rt.path, rt.body); code != http.StatusForbidden || !strings.Contains(body, "not_an_operator") {
			t.Fatalf("%s %s by a principal that is no operator: %d %s", rt.method, rt.path, code, body)
		}
	}
	if inst.n != 0 || ports.set != nil || ports.removed != "" {
		t.Fatalf("a refused caller installed or removed: %d %q %q", inst.n, ports.set, ports.removed)
	}
	if code, _ := do("agent", "GET", "/v1/ports", ""); code != http.StatusOK {
		t.Fatalf("listing ports: %d", code)
	}
	for _, rt := range routes {
		if code, body := do("ops", rt.method, rt.path, rt.body); code != http.StatusOK {
			t.Fatalf("%s %s by an operator: %d %s", rt.method, rt.path, code, body)
		}
	}
	if inst.n != 1 || string(ports.set) != "x" || ports.removed == "" {
		t.Fatalf("the operator's acts: %d %q %q", inst.n, ports.set, ports.removed)
	}
}
