package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock dev honours the user's settings: it starts without the sample
// provider binary (with a warning), serves the user's intents from the
// user's broker.secrets.file beside the demo secret, and listens where
// host.control says.
func TestDevHonoursUserSettings(t *testing.T) {
	cfg := testConfig(t)
	userFile := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(userFile, []byte("user/api: {key: user-secret-value}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Broker.Secrets.File = userFile
	cfg.Broker.Intents = map[string]broker.Intent{"user.api": {Class: broker.ClassRead,
		Secret: broker.SecretRef{Source: broker.SourceFile, Path: "user/api", Field: "key"},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}}
	control := cfg.Host.Control
	logs := &testenv.SyncBuffer{}
	var out testenv.SyncBuffer
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, cfg, DevOptions{Options: Options{Stdout: &out, Log: slog.New(slog.NewTextHandler(logs, nil)), OnReady: func(r Ready) { ready <- r }},
			Provider: filepath.Join(t.TempDir(), "no-such-provider"), Executa: filepath.Join(t.TempDir(), "no-such-executa"), Invoke: "airlock"})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Dev: %v", err)
		}
	}()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Dev without the sample provider: %v", err)
	}
	if r.Control != control {
		t.Fatalf("control API on %s, host.control says %s", r.Control, control)
	}
	if !strings.Contains(logs.String(), "the sample provider is not there") {
		t.Fatalf("no warning about the missing provider:\n%s", logs.String())
	}

	// A handle for the user's intent: the proxy reads the user's secret
	// and sends it (the demo upstream, which wants the demo secret,
	// answers 401); a secret the broker cannot read would be a 503.
	bc, err := brokerapi.Dial("unix://"+cfg.Broker.API.Socket, brokerapi.DialOptions{TokenFile: cfg.Broker.API.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	port := strings.SplitN(strings.SplitN(out.String(), "https://"+DemoHost+":", 2)[1], " ", 2)[0]
	dest, err := broker.ParseDestination("https://" + DemoHost + ":" + port + "/api/")
	if err != nil {
		t.Fatal(err)
	}
	iss, err := bc.Issue(ctx, broker.IssueRequest{PluginID: "user", InvocationID: "inv-1", Intent: "user.api",
		Destinations: []broker.Destination{dest}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	proxyURL := &url.URL{Scheme: "http", User: url.User(iss.Handle), Host: r.Proxy}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	resp, err := hc.Get("http://" + DemoHost + ":" + port + "/api/tickets")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(out.String(), "WITHOUT the demo secret") {
		t.Fatalf("a call with the user's intent: %d (want the upstream's 401)\n%s", resp.StatusCode, out.String())
	}
}

// The dev file source answers the demo path from the run's file and
// every other path from the user's.
func TestDevSecretsOverlay(t *testing.T) {
	dir := t.TempDir()
	demo, user := filepath.Join(dir, "demo.yaml"), filepath.Join(dir, "user.yaml")
	os.WriteFile(demo, []byte(demoSecretPath+": {token: demo-value}\n"), 0o600)
	os.WriteFile(user, []byte(demoSecretPath+": {token: shadowed}\nuser/api: {key: user-value}\n"), 0o600)
	s := devSecrets{demo: &broker.FileSource{Path: demo}, user: &broker.FileSource{Path: user}}
	for _, tt := range []struct{ path, field, want string }{
		{demoSecretPath, "token", "demo-value"}, {"user/api", "key", "user-value"},
	} {
		d, err := s.Read(context.Background(), broker.SecretRef{Source: broker.SourceFile, Path: tt.path, Field: tt.field})
		if err != nil || d.Fields[tt.field] != tt.want {
			t.Errorf("%s: %+v %v", tt.path, d, err)
		}
	}
}

// A second dev run keeps the last run's evidence log beside the new one
// instead of deleting it.
func TestKeepDevLog(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "evidence.jsonl")
	if err := keepDevLog(p); err != nil {
		t.Fatalf("no log yet: %v", err)
	}
	if err := os.WriteFile(p, []byte("last run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keepDevLog(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the log is still in place: %v", err)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "evidence-*.jsonl"))
	if len(kept) != 1 {
		t.Fatalf("kept: %v", kept)
	}
	if b, err := os.ReadFile(kept[0]); err != nil || string(b) != "last run\n" {
		t.Fatalf("kept log: %q %v", b, err)
	}
}

// airlock dev --config adds the demo's pin, loopback and CA to the file's
// proxy settings instead of replacing them: a plugin author's own local
// upstream, pinned and signed by the author's CA, is reached through the
// dev proxy, and so is the demo's.
func TestDevKeepsFileProxySettings(t *testing.T) {
	cfg := testConfig(t)
	const localHost = "api.local.test"
	ca := testenv.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer local-secret-value" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "local upstream")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, localHost)}}
	up.StartTLS()
	defer up.Close()
	upPort := up.Listener.Addr().(*net.TCPAddr).Port

	userFile := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(userFile, []byte("local/api: {key: local-secret-value}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Broker.Secrets.File = userFile
	cfg.Broker.Intents = map[string]broker.Intent{"local.api": {Class: broker.ClassRead,
		Secret: broker.SecretRef{Source: broker.SourceFile, Path: "local/api", Field: "key"},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}}
	cfg.Proxy.Resolve = map[string][]string{localHost: {"127.0.0.1"}}
	cfg.Proxy.UpstreamCAFile = ca.PEMFile
	cfg.Proxy.AllowCIDRs = []string{"127.0.0.1/32"}
	fileProxy := cfg.Proxy.Resolve

	var out testenv.SyncBuffer
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, cfg, DevOptions{Options: Options{Stdout: &out, OnReady: func(r Ready) { ready <- r }},
			Provider: filepath.Join(t.TempDir(), "no-such-provider"), Executa: filepath.Join(t.TempDir(), "no-such-executa"), Invoke: "airlock"})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Dev: %v", err)
		}
	}()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Dev: %v", err)
	}
	if len(fileProxy) != 1 {
		t.Fatalf("Dev changed the caller's proxy.resolve: %v", fileProxy)
	}
	bc, err := brokerapi.Dial("unix://"+cfg.Broker.API.Socket, brokerapi.DialOptions{TokenFile: cfg.Broker.API.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	get := func(intent, target string) (int, string) {
		t.Helper()
		dest, err := broker.ParseDestination(target)
		if err != nil {
			t.Fatal(err)
		}
		iss, err := bc.Issue(ctx, broker.IssueRequest{PluginID: "author", InvocationID: "inv-" + intent, Intent: intent,
			Destinations: []broker.Destination{dest}, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		proxyURL := &url.URL{Scheme: "http", User: url.User(iss.Handle), Host: r.Proxy}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
		resp, err := hc.Get("http" + strings.TrimPrefix(target, "https"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("local.api", fmt.Sprintf("https://%s:%d/api/", localHost, upPort)); code != http.StatusOK || body != "local upstream" {
		t.Fatalf("the author's local upstream through airlock dev: %d %q", code, body)
	}
	port := strings.SplitN(strings.SplitN(out.String(), "https://"+DemoHost+":", 2)[1], " ", 2)[0]
	if code, _ := get("tickets.read", "https://"+DemoHost+":"+port+"/api/tickets"); code != http.StatusOK {
		t.Fatalf("the demo upstream beside the author's: %d\n%s", code, out.String())
	}
}
