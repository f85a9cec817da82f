package pluginv1

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
)

// writePackage lays out an install package: provider (the given bytes)
// and the fixture's manifest.
func (f *hostFixture) writePackage(t *testing.T, provider []byte) string {
	t.Helper()
	pkg := t.TempDir()
	mf, err := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mf = []byte(replaceAll(string(mf), "port: 443", "port: "+f.upPort))
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), mf, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "provider"), provider, 0o700); err != nil {
		t.Fatal(err)
	}
	return pkg
}

// postInstall posts dir to the control API and returns the status code.
func postInstall(t *testing.T, url, dir string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(control.InstallRequest{Dir: dir})
	resp, err := http.Post(url+"/v1/plugins", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// asInstallOperator serves ctl to an operator principal, as the
// daemon's authentication and host.control_operators would: installing
// is an operator act.
func asInstallOperator(ctl *control.Handler) http.Handler {
	ctl.SetOperator(func(p host.Principal) bool { return p.ID == "operator" })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctl.ServeHTTP(w, r.WithContext(control.WithCaller(r.Context(), host.Principal{ID: "operator", Method: control.MethodToken})))
	})
}

// A reinstall whose handshake fails leaves the running plugin alone: it
// keeps serving, its files and lockfile entry are untouched, and it
// restarts from them. A reinstall that succeeds takes effect at the
// plugin's next launch, which then succeeds.
func TestFailedReinstallKeepsRunningPlugin(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	state := t.TempDir()
	pluginsDir, lock := filepath.Join(state, "plugins"), filepath.Join(state, "plugins.lock.json")
	ctl := control.NewHandler(h)
	ctl.EnableInstall(&Installer{Host: h, PluginsDir: pluginsDir, Lockfile: lock})
	srv := httptest.NewServer(asInstallOperator(ctl))
	defer srv.Close()
	good, err := os.ReadFile(providerBin)
	if err != nil {
		t.Fatal(err)
	}
	name := f.inst.Name
	if code, res := postInstall(t, srv.URL, f.writePackage(t, good)); code != http.StatusOK || res["state"] != string(host.StateRunning) {
		t.Fatalf("first install: %d %v", code, res)
	}
	before, err := ReadLockfile(lock)
	if err != nil {
		t.Fatal(err)
	}
	installed := before.Plugins[name]
	pid := statusOf(h, name).Pid

	// A provider that never hands shake: it prints something else and exits.
	bad := f.writePackage(t, []byte("#!/bin/sh\necho not-a-handshake\n"))
	if code, res := postInstall(t, srv.URL, bad); code != http.StatusUnprocessableEntity || res["error"] != "install_failed" {
		t.Fatalf("bad reinstall: %d %v", code, res)
	}
	if s := statusOf(h, name); s.State != host.StateRunning || s.Pid != pid {
		t.Fatalf("the running plugin after a failed reinstall: %+v", s)
	}
	if out, err := invokeList(h, name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("call after a failed reinstall: %+v %v", out, err)
	}
	after, err := ReadLockfile(lock)
	if err != nil || after.Plugins[name] != installed {
		t.Fatalf("lockfile after a failed reinstall: %+v %v", after.Plugins[name], err)
	}
	if d, err := BinaryDigest(installed.Binary); err != nil || d != installed.BinarySHA256 {
		t.Fatalf("the installed binary after a failed reinstall: %s %v", d, err)
	}
	if des, _ := os.ReadDir(filepath.Join(pluginsDir, name)); len(des) != 1 {
		t.Fatalf("the failed install left %d entries beside the installed version", len(des)-1)
	}

	// It restarts from its own version.
	killPid(t, pid)
	waitState(t, h, name, "restarted", func(s host.Status) bool { return s.State == host.StateRunning && s.Pid != pid })
	if out, err := invokeList(h, name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("call after the restart: %+v %v", out, err)
	}

	// A good reinstall with another binary (trailing bytes change its
	// digest, not its behaviour) is launched at the next restart.
	newer := append(append([]byte(nil), good...), "airlock-reinstall"...)
	if code, res := postInstall(t, srv.URL, f.writePackage(t, newer)); code != http.StatusOK {
		t.Fatalf("good reinstall: %d %v", code, res)
	}
	lf, _ := ReadLockfile(lock)
	if lf.Plugins[name].BinarySHA256 == installed.BinarySHA256 {
		t.Fatal("the lockfile still names the old binary")
	}
	if _, err := os.Stat(installed.Dir); !os.IsNotExist(err) {
		t.Fatalf("the old version was kept: %v", err)
	}
	pid = statusOf(h, name).Pid
	killPid(t, pid)
	waitState(t, h, name, "restarted on the new version", func(s host.Status) bool { return s.State == host.StateRunning && s.Pid != pid })
	if out, err := invokeList(h, name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("call on the new version: %+v %v", out, err)
	}
}

// A reinstall of a plugin the supervisor marked failed (its restart
// budget spent) launches it again at once with a whole budget; no host
// restart is needed.
func TestReinstallRevivesFailedPlugin(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	f := newHostFixture(t)
	h := newTestHost(t, f, nil)
	state := t.TempDir()
	ctl := control.NewHandler(h)
	ctl.EnableInstall(&Installer{Host: h, PluginsDir: filepath.Join(state, "plugins"), Lockfile: filepath.Join(state, "plugins.lock.json")})
	srv := httptest.NewServer(asInstallOperator(ctl))
	defer srv.Close()
	good, err := os.ReadFile(providerBin)
	if err != nil {
		t.Fatal(err)
	}
	name := f.inst.Name
	if code, res := postInstall(t, srv.URL, f.writePackage(t, good)); code != http.StatusOK || res["state"] != string(host.StateRunning) {
		t.Fatalf("first install: %d %v", code, res)
	}
	// Four crashes in a row spend a budget of three.
	for {
		s := waitState(t, h, name, "running or failed", func(s host.Status) bool {
			return s.State == host.StateRunning || s.State == host.StateFailed
		})
		if s.State == host.StateFailed {
			break
		}
		killPid(t, s.Pid)
		waitState(t, h, name, "noticed the crash", func(n host.Status) bool { return n.Pid != s.Pid })
	}
	newer := append(append([]byte(nil), good...), "airlock-reinstall"...)
	code, res := postInstall(t, srv.URL, f.writePackage(t, newer))
	if code != http.StatusOK || res["state"] != string(host.StateRunning) {
		t.Fatalf("reinstall of a failed plugin: %d %v", code, res)
	}
	if out, err := invokeList(h, name); err != nil || out.Status != host.CallSucceeded {
		t.Fatalf("call after the reinstall: %+v %v", out, err)
	}
}
