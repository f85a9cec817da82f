package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/lease"
	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/tracing/tracingtest"
)

// mtlsHost is an upstream that requires a client certificate from the
// Vault PKI mount and refuses one on the mount's CRL, read at each
// handshake (as an upstream checking revocation strictly would).
const mtlsHost = "mtls.example.org"

type mtlsUpstream struct {
	port int
	mu   sync.Mutex
	// handshakes counts TLS handshakes by client certificate serial.
	handshakes map[string]int
}

func (u *mtlsUpstream) count(serial string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.handshakes[serial]
}

func startMTLSUpstream(t *testing.T, ca *testenv.CA, v *testenv.VaultServer, mount, pkiCA string) *mtlsUpstream {
	t.Helper()
	u := &mtlsUpstream{handshakes: map[string]int{}}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(pkiCA)) {
		t.Fatal("no PKI CA")
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].SerialNumber.Text(16))
	}))
	srv.TLS = tls12Config{}.config(ca, t)
	srv.TLS.NextProtos = []string{"http/1.1"}
	srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	srv.TLS.ClientCAs = roots
	srv.TLS.VerifyConnection = func(cs tls.ConnectionState) error {
		leaf := cs.PeerCertificates[0]
		resp, err := http.Get(v.Addr + "/v1/" + mount + "/crl")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		der, _ := io.ReadAll(resp.Body)
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			return fmt.Errorf("CRL: %w", err)
		}
		for _, e := range crl.RevokedCertificateEntries {
			if e.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
				return errors.New("client certificate revoked")
			}
		}
		u.mu.Lock()
		u.handshakes[leaf.SerialNumber.Text(16)]++
		u.mu.Unlock()
		return nil
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u.port, _ = strconv.Atoi(port)
	return u
}

// mtlsConfig is a broker config whose intent "mtls" is a client
// certificate leased from the PKI mount.
func mtlsConfig(mount string) broker.Config {
	return broker.Config{EgressProxy: "127.0.0.1:0", Intents: map[string]broker.Intent{
		"mtls": {Class: broker.ClassWrite, Inject: broker.Inject{Kind: &broker.ClientCertInject{}},
			Secret: broker.SecretRef{Source: broker.SourceVaultLease, Mount: mount, Path: "issue/leaf", Field: "certificate",
				Data: map[string]string{"common_name": "plugin.airlock.test", "ttl": "10m"}}},
	}}
}

// Each invocation presents its own certificate from Vault's PKI engine on
// the upstream TLS connection (nothing of it in the request; its private
// key only in the proxy); an invocation's requests share a pooled
// connection, another invocation never gets it; when the invocation ends
// the certificate is revoked with its lease and the upstream refuses it.
func TestClientCertPerInvocation(t *testing.T) {
	v := testenv.Vault(t)
	mount := "pki-" + rand.Text()[:8]
	pkiCA := v.MountPKI(t, mount)
	ca := testenv.NewCA(t)
	up := startMTLSUpstream(t, ca, v, mount, pkiCA)
	bc := mtlsConfig(mount)
	p := startLeaseProxy(t, ca, bc, nil, v.Client(t), mtlsHost)
	issue := func(inv string) string {
		iss, err := p.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-mtls", InvocationID: inv, Intent: "mtls",
			Destinations: []broker.Destination{{Host: mtlsHost, Port: up.port}}, Deadline: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return iss.Handle
	}
	get := func(handle string) (int, string, string) {
		pu := &url.URL{Scheme: "http", Host: p.addr, User: url.User(handle)}
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}, Timeout: 30 * time.Second}
		resp, err := c.Get("http://" + mtlsHost + ":" + strconv.Itoa(up.port) + "/whoami")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get(HeaderError)
	}
	h1, h2 := issue("inv-a"), issue("inv-a")
	code, serialA, errCode := get(h1)
	if code != http.StatusOK {
		t.Fatalf("first request: %d %s %s", code, errCode, serialA)
	}
	for range 3 {
		if code, s, _ := get(h2); code != http.StatusOK || s != serialA {
			t.Fatalf("the invocation's other handle: %d %q, want the same certificate %q", code, s, serialA)
		}
	}
	if n := up.count(serialA); n != 1 {
		t.Fatalf("%d TLS handshakes for one invocation's 4 requests; want 1 (pooled per certificate)", n)
	}
	hb := issue("inv-b")
	code, serialB, _ := get(hb)
	if code != http.StatusOK || serialB == serialA {
		t.Fatalf("another invocation: %d %q; want a certificate of its own", code, serialB)
	}
	if !strings.Contains(p.audit.String(), `"lease_fp":"`) {
		t.Fatal("audit lines lack the lease fingerprint")
	}
	end, err := p.b.EndInvocation(context.Background(), "inv-a")
	if err != nil || len(end.Leases) != 1 || !end.Leases[0].Revoked {
		t.Fatalf("end: %+v %v", end, err)
	}
	// The certificate is on the CRL: the upstream refuses a handshake
	// with it. (The ended invocation's handles are refused by the proxy
	// first; present the certificate directly, as a copy of it would be.)
	if err := requestWith(t, ca, up.port, serialA); err == nil {
		t.Fatal("the upstream accepted the ended invocation's certificate")
	}
	if code, s, _ := get(hb); code != http.StatusOK || s != serialB {
		t.Fatalf("the other invocation after the first ended: %d %q", code, s)
	}
}

// requestWith sends a request to the upstream presenting the client
// certificate with this serial, taken from the proxy's parsed
// certificates (the test stands in for whoever copied it).
func requestWith(t *testing.T, ca *testenv.CA, port int, serial string) error {
	t.Helper()
	var cert *tls.Certificate
	clientCerts.Lock()
	for _, cc := range clientCerts.byID {
		if leaf, err := x509.ParseCertificate(cc.cert.Certificate[0]); err == nil && leaf.SerialNumber.Text(16) == serial {
			cert = &cc.cert
		}
	}
	clientCerts.Unlock()
	if cert == nil {
		t.Fatal("the proxy holds no certificate with that serial")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: mtlsHost, Certificates: []tls.Certificate{*cert}},
		DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://127.0.0.1:" + strconv.Itoa(port) + "/whoami")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// A sampled request whose secret is a lease obtained for it has the
// lease's span under its request span, in the plugin's trace, with the
// lease's fingerprint as the audit line has it.
func TestLeaseObtainTraced(t *testing.T) {
	rcv, tr := tracingtest.Start(t, tracing.Options{})
	v := testenv.Vault(t)
	mount := "pki-" + rand.Text()[:8]
	pkiCA := v.MountPKI(t, mount)
	ca := testenv.NewCA(t)
	up := startMTLSUpstream(t, ca, v, mount, pkiCA)
	bc := mtlsConfig(mount)
	p := startLeaseProxyTraced(t, ca, bc, nil, v.Client(t), mtlsHost, tr)
	iss, err := p.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-mtls", InvocationID: "inv-t", Intent: "mtls",
		Destinations: []broker.Destination{{Host: mtlsHost, Port: up.port}}, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("GET", "http://"+mtlsHost+":"+strconv.Itoa(up.port)+"/whoami", nil)
	req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	pu := &url.URL{Scheme: "http", Host: p.addr, User: url.User(iss.Handle)}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %d %s", resp.StatusCode, resp.Header.Get(HeaderError))
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reqSpan, leaseSpan tracingtest.Span
	for _, s := range rcv.Spans() {
		switch s.Name {
		case spanRequest:
			reqSpan = s
		case lease.SpanObtain:
			leaseSpan = s
		}
	}
	if reqSpan.TraceID != trace || leaseSpan.TraceID != trace || leaseSpan.ParentSpanID != reqSpan.SpanID ||
		leaseSpan.Attrs["airlock.lease_fp"] == "" || !strings.Contains(p.audit.String(), `"lease_fp":"`+leaseSpan.Attrs["airlock.lease_fp"]+`"`) {
		t.Fatalf("request span %+v, lease span %+v", reqSpan, leaseSpan)
	}
}
