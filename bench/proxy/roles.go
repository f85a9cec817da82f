package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/devca"
	"github.com/airlock-dev/airlock/proxy"
)

const benchSecret = "sk-bench-0123456789abcdef"

func writeCerts(dir string) {
	ca, err := devca.New(dir, time.Hour)
	check(err)
	cert, err := ca.IssueCert(benchHost, "127.0.0.1")
	check(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	check(err)
	check(os.WriteFile(path(dir, "cert.der"), cert.Certificate[0], 0o600))
	check(os.WriteFile(path(dir, "key.der"), keyDER, 0o600))
}

func loadRoots(dir string) *x509.CertPool {
	pem, err := os.ReadFile(path(dir, "ca.pem"))
	check(err)
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	// The airlock role's intercept CA, for clients that CONNECT to it.
	if ic, err := os.ReadFile(path(dir, "intercept-ca.pem")); err == nil {
		p.AppendCertsFromPEM(ic)
	}
	return p
}

func serverCert(dir string) tls.Certificate {
	der, err := os.ReadFile(path(dir, "cert.der"))
	check(err)
	keyDER, err := os.ReadFile(path(dir, "key.der"))
	check(err)
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	check(err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// runUpstream serves a fixed body over HTTPS (HTTP/1.1 and HTTP/2).
func runUpstream(dir string, size int) {
	body := bytes.Repeat([]byte("a"), size)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" { // -conns: a WebSocket echo
			echoWebSocket(w, r)
			return
		}
		if r.URL.Path == "/token" { // the oauth2 processor's token endpoint
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"at-bench-0123456789abcdef","token_type":"Bearer","expires_in":3600}`)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverCert(dir)}, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog: log.New(io.Discard, "", 0)}
	fmt.Println(l.Addr().String())
	check(srv.ServeTLS(l, "", ""))
}

// pinDial sends benchHost to the upstream address.
func pinDial(upstream string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, benchHost+":") {
			addr = upstream
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
}

// runGoproxy is the naive baseline: goproxy upgrading http:// to https://
// with a tuned transport and no checks at all.
func runGoproxy(dir, upstream string) {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.Tr = &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: loadRoots(dir)}, DialContext: pinDial(upstream),
		MaxIdleConnsPerHost: 256, ForceAttemptHTTP2: false,
	}
	gp.OnRequest().DoFunc(func(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		r.URL.Scheme = "https"
		return r, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(l.Addr().String())
	check(http.Serve(l, gp))
}

// runAirlock runs the real proxy with a memory broker (or, with redisAddr,
// the Redis store and its local grant cache), an intent injected by kind
// (header, or a processor: hmac, aws_sigv4, oauth2 — client credentials
// against the upstream's /token) and the echo guard on; it prints its
// address and a handle.
func runAirlock(dir, upstream, redisAddr, kind string) {
	secrets := path(dir, "secrets.yaml")
	check(os.WriteFile(secrets, []byte("bench/api: {token: "+benchSecret+", access_key_id: AKIDBENCH, client_id: bench}\n"), 0o600))
	host, port, _ := net.SplitHostPort(upstream)
	var p int
	fmt.Sscan(port, &p)
	in := broker.Intent{Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "bench/api", Field: "token"},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}
	switch kind {
	case "hmac":
		in.Inject = broker.Inject{Kind: &broker.HMACInject{Header: "X-Signature", Template: "sha256={{signature}}"}}
	case "aws_sigv4":
		in.Inject = broker.Inject{Kind: &broker.SigV4Inject{Region: "us-east-1", Service: "execute-api"}}
	case "oauth2":
		in.Destinations = []broker.Destination{{Host: benchHost, Port: p}}
		in.Inject = broker.Inject{Kind: &broker.OAuth2ClientCredentialsInject{ClientIDField: "client_id",
			TokenInject: broker.TokenInject{TokenURL: fmt.Sprintf("https://%s:%d/token", benchHost, p)}}}
	}
	bc := broker.Config{Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{"bench": in}}.WithDefaults()
	check(bc.Validate())
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}},
		bc.Secrets.CacheTTL, 0, nil, nil)
	var store broker.Store = broker.NewMemoryStore(1000, time.Minute, time.Hour, nil)
	if redisAddr != "" {
		rs, err := broker.NewRedisStore(broker.RedisConfig{Address: redisAddr}, time.Minute, time.Hour)
		check(err)
		go rs.Run(context.Background())
		time.Sleep(200 * time.Millisecond) // the invalidation feed goes live
		store = rs
	}
	b := broker.New(bc, store, cache, broker.Options{})
	iss, err := b.Issue(context.Background(), broker.IssueRequest{PluginID: benchPlugin, InvocationID: "bench", Intent: "bench",
		Destinations: []broker.Destination{{Host: benchHost, Port: p}}, Deadline: time.Now().Add(time.Hour)})
	check(err)
	cfg := proxy.Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: path(dir, "ca.pem"),
		Resolve:   map[string][]string{benchHost: {host}},
		Limits:    proxy.LimitsConfig{PerHandleRPS: 1e9, PerPluginRPS: 1e9, PerPluginConcurrency: 1 << 20},
		Intercept: proxy.InterceptConfig{CAFile: path(dir, "intercept-ca.pem"), CAKeyFile: path(dir, "intercept-ca.key")}}.WithDefaults()
	check(cfg.Validate())
	px, err := proxy.New(cfg, b, proxy.Options{Logger: slog.New(slog.DiscardHandler), Audit: slog.New(slog.DiscardHandler)})
	check(err)
	if addr := os.Getenv("AIRLOCK_BENCH_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }() // net/http/pprof on DefaultServeMux
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(l.Addr().String(), iss.Handle)
	check(px.Serve(context.Background(), l))
}
