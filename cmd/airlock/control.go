package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// controlTarget is a control API to call and how to authenticate.
type controlTarget struct {
	addr   string
	client *http.Client
	base   string
}

// controlFlags adds --config, --control, --control-token-file and the
// mutual-TLS flags, and returns a function that resolves them: a flag,
// else its environment variable, else the config's host.control and
// host.control_token_file — so that with the same config (or none) the
// CLI finds the control API and token airlock host or airlock dev made.
func controlFlags(fs *flag.FlagSet) func() (controlTarget, error) {
	path := configFlag(fs)
	addr := fs.String("control", "", "control API: unix:/path, http://host:port or https://host:port (default $AIRLOCK_CONTROL, else host.control)")
	tokenFile := fs.String("control-token-file", "", "a file whose bearer token every request presents: the control token, "+
		"a principal's own token (host.control_principals.tokens) or an OIDC JWT (host.control_principals.jwt); "+
		"read at each request (default $AIRLOCK_CONTROL_TOKEN_FILE, else host.control_token_file)")
	cert := fs.String("control-cert", "", "client certificate for a control API with host.control_tls: "+
		"it names the caller (its SPIFFE ID or subject) (default $AIRLOCK_CONTROL_CERT)")
	key := fs.String("control-key", "", "its private key (default $AIRLOCK_CONTROL_KEY)")
	ca := fs.String("control-ca", "", "the CA that signed the control API's certificate (default $AIRLOCK_CONTROL_CA)")
	return func() (controlTarget, error) {
		a, tf := orEnv(*addr, "AIRLOCK_CONTROL"), orEnv(*tokenFile, "AIRLOCK_CONTROL_TOKEN_FILE")
		certFile, keyFile, caFile := orEnv(*cert, "AIRLOCK_CONTROL_CERT"), orEnv(*key, "AIRLOCK_CONTROL_KEY"), orEnv(*ca, "AIRLOCK_CONTROL_CA")
		if a == "" || (tf == "" && certFile == "") {
			cfg, err := loadConfig(*path)
			if err != nil {
				return controlTarget{}, err
			}
			if a == "" {
				a = cfg.Host.Control
			}
			if tf == "" {
				tf = cfg.Host.ControlTokenFile
			}
		}
		o := daemon.ControlClientOptions{TokenFile: tf}
		if certFile != "" {
			tc, err := clientTLS(certFile, keyFile, caFile)
			if err != nil {
				return controlTarget{}, err
			}
			o.TLS = tc
		}
		client, base := daemon.ControlClient(a, o)
		return controlTarget{addr: a, client: client, base: base}, nil
	}
}

func orEnv(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

func clientTLS(cert, key, ca string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--control-cert/--control-key: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--control-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("--control-ca: no PEM certificate in it")
		}
	}
	return tc, nil
}

// unreachable is the error for a control API that did not answer.
func (t controlTarget) unreachable(err error) error {
	if path, ok := strings.CutPrefix(t.addr, "unix:"); ok {
		if why := peerauth.Refusal(path); why != "" {
			return fmt.Errorf("control API at %s refused this user: %s", t.addr, why)
		}
	}
	return fmt.Errorf("control API at %s: %w (is airlock dev or airlock host running?)", t.addr, err)
}

// refused reads a control API refusal ({"error","detail"}).
func refused(resp *http.Response) error {
	var e struct{ Error, Detail string }
	if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e) != nil || e.Error == "" {
		return fmt.Errorf("refused: the control API answered %s", resp.Status)
	}
	return fmt.Errorf("refused: %s: %s", e.Error, e.Detail)
}
