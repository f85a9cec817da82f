package control_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// Two principals' token files: each caller reaches the host as its own
// principal; the shared control token on plain TCP is "control-token";
// a wrong token, none, a token file others may read, and two
// Authorization headers are refused 401 before the host sees anything,
// with the reason in the log and the token nowhere in it.
func TestTokenFilePrincipals(t *testing.T) {
	a := newAPIHost(t)
	dir := t.TempDir()
	aliceTok, aliceFile := writeToken(t, dir, "alice.token")
	bobTok, bobFile := writeToken(t, dir, "bob.token")
	openTok, openFile := writeToken(t, dir, "open.token")
	if err := os.Chmod(openFile, 0o644); err != nil {
		t.Fatal(err)
	}
	ctlTok := peerauth.NewSecret()
	log, logBuf := logTo()
	srv := httptest.NewServer(control.Authenticate(a.ctl, control.AuthOptions{
		ControlToken: peerauth.NewToken(ctlTok),
		Tokens: []control.TokenFile{{Principal: "alice", File: aliceFile}, {Principal: "bob", File: bobFile},
			{Principal: "carol", File: openFile}},
	}, log))
	defer srv.Close()

	for _, tc := range []struct {
		bearer, want string
	}{
		{aliceTok, "alice"}, {bobTok, "bob"}, {ctlTok, control.ControlTokenPrincipal},
	} {
		if got := invoke(t, srv.Client(), srv.URL, tc.bearer, stubCall); got.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.want, got.status, got.body)
		}
		got := a.rec.last()
		if got.Caller.ID != tc.want || got.Actor != (host.Actor{Kind: control.ActorPrincipal, Principal: tc.want}) {
			t.Fatalf("the host saw caller %+v actor %+v, want %s", got.Caller, got.Actor, tc.want)
		}
		if !strings.Contains(logBuf.String(), `"principal":"`+tc.want+`"`) {
			t.Fatalf("no log line names %s:\n%s", tc.want, logBuf.String())
		}
	}
	if a.rec.last().Caller.Method != control.MethodToken {
		t.Fatalf("method %q", a.rec.last().Caller.Method)
	}

	seen := a.rec.count()
	for name, bearer := range map[string]string{"wrong": peerauth.NewSecret(), "none": "", "readable by others": openTok} {
		got := invoke(t, srv.Client(), srv.URL, bearer, stubCall)
		if got.status != http.StatusUnauthorized || got.code != "unauthenticated" {
			t.Fatalf("%s: %d %s", name, got.status, got.body)
		}
	}
	if !strings.Contains(logBuf.String(), "readable by others") {
		t.Fatalf("the refusal does not say the token file is readable by others:\n%s", logBuf.String())
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/invocations", strings.NewReader(stubCall))
	req.Header.Add("Authorization", "Bearer "+aliceTok)
	req.Header.Add("Authorization", "Bearer "+bobTok)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("two Authorization headers: %d", resp.StatusCode)
	}
	if a.rec.count() != seen {
		t.Fatal("a refused request reached the host")
	}
	mustNotContain(t, logBuf, aliceTok, bobTok, ctlTok, openTok)

	// A token file rewritten is read at the next request: the old token
	// no longer names alice.
	newTok, _ := writeToken(t, dir, "alice.token")
	if got := invoke(t, srv.Client(), srv.URL, aliceTok, stubCall); got.status != http.StatusUnauthorized {
		t.Fatalf("the old token after a rewrite: %d", got.status)
	}
	if got := invoke(t, srv.Client(), srv.URL, newTok, stubCall); got.status != http.StatusOK || a.rec.last().Caller.ID != "alice" {
		t.Fatalf("the new token: %d %+v", got.status, a.rec.last().Caller)
	}
}

// On the unix socket the peer's uid names the caller: its configured
// name, else "uid:<N>". The control token is still required (a gate, not
// a name); a principal's own token names that principal instead.
func TestUnixPeerPrincipals(t *testing.T) {
	a := newAPIHost(t)
	dir := t.TempDir()
	ctlTok := peerauth.NewSecret()
	aliceTok, aliceFile := writeToken(t, dir, "alice.token")
	uid := os.Getuid()
	for _, tc := range []struct {
		name   string
		peers  map[int]string
		bearer string
		want   string
		method string
	}{
		{"named uid", map[int]string{uid: "root-operator"}, ctlTok, "root-operator", control.MethodPeer},
		{"unnamed uid", nil, ctlTok, "uid:" + strconv.Itoa(uid), control.MethodPeer},
		{"a principal's token", map[int]string{uid: "root-operator"}, aliceTok, "alice", control.MethodToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "run", "control.sock")
			l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{Name: "control socket", AllowedUIDs: []int{uid}, GID: peerauth.NoGroup})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(control.Authenticate(a.ctl, control.AuthOptions{
				ControlToken: peerauth.NewToken(ctlTok), RequireBearer: true, Peers: tc.peers,
				Tokens: []control.TokenFile{{Principal: "alice", File: aliceFile}},
			}, nil))
			srv.Listener.Close()
			srv.Listener = l
			srv.Config.ConnContext = control.ConnContext
			srv.Start()
			defer srv.Close()
			c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			}}}
			defer c.CloseIdleConnections()
			if got := invoke(t, c, "http://airlock", tc.bearer, stubCall); got.status != http.StatusOK {
				t.Fatalf("%d %s", got.status, got.body)
			}
			if got := a.rec.last().Caller; got.ID != tc.want || got.Method != tc.method {
				t.Fatalf("the host saw %+v, want %s (%s)", got, tc.want, tc.method)
			}
			if got := invoke(t, c, "http://airlock", "", stubCall); got.status != http.StatusUnauthorized {
				t.Fatalf("no bearer on the socket: %d", got.status)
			}
		})
	}
}

// A client certificate names its caller: its SPIFFE ID, else its
// subject; id_from picks the common name or the subject instead. Two
// certificates reach the host as two principals.
func TestCertificatePrincipals(t *testing.T) {
	a := newAPIHost(t)
	ca := testenv.NewCA(t)
	server := ca.Issue(t, "127.0.0.1")
	agent := ca.Issue(t, "agent.example", "spiffe://example.org/ns/prod/sa/agent")
	laptop := ca.Issue(t, "alice-laptop")
	for _, tc := range []struct {
		name   string
		from   control.CertIDFrom
		client tls.Certificate
		want   string
	}{
		{"spiffe id", "", agent, "spiffe://example.org/ns/prod/sa/agent"},
		{"no spiffe id: the subject", control.CertIDSPIFFE, laptop, "dn:CN=alice-laptop"},
		{"subject_cn", control.CertIDSubjectCN, laptop, "cn:alice-laptop"},
		{"subject over a spiffe id", control.CertIDSubject, agent, "dn:CN=agent.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(control.Authenticate(a.ctl, control.AuthOptions{CertID: tc.from}, nil))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequireAndVerifyClientCert,
				ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS13}
			srv.StartTLS()
			defer srv.Close()
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(),
				Certificates: []tls.Certificate{tc.client}}}}
			defer c.CloseIdleConnections()
			if got := invoke(t, c, srv.URL, "", stubCall); got.status != http.StatusOK {
				t.Fatalf("%d %s", got.status, got.body)
			}
			if got := a.rec.last().Caller; got.ID != tc.want || got.Method != control.MethodMTLS {
				t.Fatalf("the host saw %+v, want %s", got, tc.want)
			}
		})
	}
}

// With a control token set over mutual TLS, a request without a bearer
// is refused even with a good certificate (the setting's promise).
func TestCertificateWithRequiredToken(t *testing.T) {
	a := newAPIHost(t)
	ca := testenv.NewCA(t)
	ctlTok := peerauth.NewSecret()
	srv := httptest.NewUnstartedServer(control.Authenticate(a.ctl, control.AuthOptions{
		ControlToken: peerauth.NewToken(ctlTok), RequireBearer: true}, nil))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1")}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(),
		Certificates: []tls.Certificate{ca.Issue(t, "spiffe://example.org/agent")}}}}
	defer c.CloseIdleConnections()
	if got := invoke(t, c, srv.URL, "", stubCall); got.status != http.StatusUnauthorized {
		t.Fatalf("no bearer: %d", got.status)
	}
	if got := invoke(t, c, srv.URL, ctlTok, stubCall); got.status != http.StatusOK || a.rec.last().Caller.ID != "spiffe://example.org/agent" {
		t.Fatalf("bearer and certificate: %d %+v", got.status, a.rec.last().Caller)
	}
}
