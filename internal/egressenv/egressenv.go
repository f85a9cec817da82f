// Package egressenv is the environment that sends a plugin's HTTP through
// the egress proxy, for both plugin kinds: HTTP_PROXY always, and with
// the proxy's intercept CA, HTTPS_PROXY and the variables that make the
// common TLS stacks trust that CA (Go and OpenSSL: SSL_CERT_FILE; Python
// requests: REQUESTS_CA_BUNDLE; curl: CURL_CA_BUNDLE; Node:
// NODE_EXTRA_CA_CERTS).
package egressenv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/fsutil"
)

// CAName is the file name of the intercept CA certificate in a plugin's
// private directory.
const CAName = "airlock-intercept-ca.pem"

// Names are the variables Vars may set; the host owns them, so a
// plugin's configured environment cannot override them.
var Names = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy",
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// Vars returns the environment for proxy (host:port) and, when caFile is
// set, the intercept CA certificate at caFile. pass, when set, is the
// plugin's pass: it goes in HTTPS_PROXY's userinfo only, so every CONNECT
// names the plugin, while plain http:// requests keep finding their
// handle in their own headers.
func Vars(proxy, caFile, pass string) []string {
	if proxy == "" {
		return nil
	}
	u := "http://" + proxy
	out := []string{"HTTP_PROXY=" + u, "http_proxy=" + u}
	if caFile != "" {
		su := u
		if pass != "" {
			// user:password, not the pass alone: Python's urllib sends
			// proxy credentials only when both are present.
			su = "http://airlock:" + pass + "@" + proxy
		}
		out = append(out, "HTTPS_PROXY="+su, "https_proxy="+su, "SSL_CERT_FILE="+caFile, "REQUESTS_CA_BUNDLE="+caFile,
			"CURL_CA_BUNDLE="+caFile, "NODE_EXTRA_CA_CERTS="+caFile)
	}
	return out
}

// InstallCA copies the intercept CA certificate into dir (a plugin's
// private directory) and returns the copy's path; "" when caFile is "".
// Only the certificate is ever copied: the key stays with the proxy.
func InstallCA(caFile, dir string) (string, error) {
	if caFile == "" {
		return "", nil
	}
	dst := filepath.Join(dir, CAName)
	if err := fsutil.CopyFile(caFile, dst, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}

// Pass asks the broker for a plugin's pass (see broker.IssueRequest.Pass)
// covering dests, or when none the bindings of intents. The host puts it
// in HTTPS_PROXY and revokes it with the plugin's handles when the plugin
// exits. A plugin that cannot have one — its intents declare no
// destination, or name an intent the broker does not know — starts
// without a pass ("", nil), with a warning in log: its CONNECTs then
// need a handle in the proxy URL. Any other failure (the handle store
// unavailable) is an error, and the start is retried as any failed start.
func Pass(ctx context.Context, b broker.API, plugin string, dests []broker.Destination, intents []string, log *slog.Logger) (string, error) {
	iss, err := b.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: "pass-" + rand.Text(), Pass: true,
		Destinations: dests, PassIntents: intents})
	if errors.Is(err, broker.ErrBadRequest) || errors.Is(err, broker.ErrIntentUnknown) {
		if log != nil {
			log.Warn("the plugin starts without a proxy pass: https:// CONNECTs need a handle in the proxy URL", "reason", err.Error())
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the plugin's proxy pass: %w", err)
	}
	return iss.Handle, nil
}
