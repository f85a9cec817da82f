package proxy_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/proxy"
)

// A plugin sends a plain-HTTP, absolute-form request to the proxy with its
// handle as the proxy user name (HTTP_PROXY=http://<handle>@host:port); the
// proxy checks the destination, injects the secret and calls the upstream
// over verified TLS. Here the upstream is a local test server, so the
// config allows loopback and pins the name to it.
func Example() {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream got %s %s over TLS, authorized: %t",
			r.Method, r.URL.Path, r.TLS != nil && r.Header.Get("Authorization") == "Bearer example-token")
	}))
	defer upstream.Close()
	port := upstream.Listener.Addr().(*net.TCPAddr).Port

	dir, _ := os.MkdirTemp("", "proxy-example-")
	defer os.RemoveAll(dir)
	caFile := filepath.Join(dir, "upstream-ca.pem")
	_ = os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}), 0o600)
	secrets := filepath.Join(dir, "secrets.yaml")
	_ = os.WriteFile(secrets, []byte("tickets/api:\n  token: example-token\n"), 0o600)

	// The broker: one intent whose secret goes into Authorization.
	bc := broker.Config{
		Secrets: broker.SecretsConfig{File: secrets},
		Intents: map[string]broker.Intent{"tickets.read": {
			Class:  broker.ClassRead,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "tickets/api", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}},
		}},
	}.WithDefaults()
	b := broker.New(bc, broker.NewMemoryStore(100, 0, time.Hour, nil),
		broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}}, time.Minute, 0, nil, nil),
		broker.Options{})

	// The proxy: loopback is refused unless allowed, as a private
	// deployment would allow its own ranges.
	cfg := proxy.Config{
		AllowCIDRs:     []string{"127.0.0.0/8"},
		UpstreamCAFile: caFile,
		Resolve:        map[string][]string{"api.example.com": {"127.0.0.1"}},
	}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	p, err := proxy.New(cfg, b, proxy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, l) }()
	defer func() { cancel(); <-served }()

	// The host issues a handle to the plugin for this invocation.
	issued, err := b.Issue(ctx, broker.IssueRequest{
		PluginID: "example.tickets", InvocationID: "inv-1", Intent: "tickets.read",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: port}},
		Deadline:     time.Now().Add(time.Minute),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The plugin: a stock HTTP client, no secret in sight.
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.User(issued.Handle), Host: l.Addr().String()})}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example.com:" + strconv.Itoa(port) + "/v1/tickets")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	// Somewhere the handle was not issued for: refused with a code.
	resp, err = (&http.Client{Transport: tr}).Get("http://example.com:" + strconv.Itoa(port) + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get(proxy.HeaderError))
	// Output:
	// 200 upstream got GET /v1/tickets over TLS, authorized: true
	// 403 destination_not_declared
}

// A host hands the proxy a listener of one plugin's own (at the
// namespaces level, on the loopback of the plugin's network namespace),
// naming the plugin. On it the proxy takes only that plugin's handles and
// pass: another plugin's, leaked or stolen, is refused.
func ExampleServer_ServeSandbox() {
	b := broker.New(broker.Config{Intents: map[string]broker.Intent{}}.WithDefaults(),
		broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	p, err := proxy.New(proxy.Config{}, b, proxy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0") // example.tickets's own listener
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.ServeSandbox(ctx, "example.tickets", l) }()
	defer func() { cancel(); <-served }()

	// The pass the host gave another plugin, sent from example.tickets.
	other, err := b.Issue(ctx, broker.IssueRequest{PluginID: "example.other", InvocationID: "pass", Pass: true,
		Destinations: []broker.Destination{{Host: "api.example.com", Port: 443}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String(), User: url.User(other.Handle)})}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example.com/v1/tickets")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get(proxy.HeaderError))
	// Output: 403 handle_not_this_plugins
}
