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
	"sync/atomic"
	"time"

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
// in HTTPS_PROXY, keeps it alive with a Keeper while the plugin runs and
// revokes it with the plugin's handles when the plugin exits. A plugin
// that cannot have one — its intents declare no destination, or name an
// intent the broker does not know — starts without a pass (a zero
// Issued, nil), with a warning in log: its CONNECTs then need a handle in
// the proxy URL. Any other failure (the handle store unavailable) is an
// error, and the start is retried as any failed start.
//
// The pass is issued under an invocation id of its own, returned as inv:
// revoking that invocation revokes the pass (after the plugin's exit).
func Pass(ctx context.Context, b broker.API, plugin string, dests []broker.Destination, intents []string, log *slog.Logger) (iss broker.Issued, inv string, err error) {
	inv = "pass-" + rand.Text()
	iss, err = b.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: inv, Pass: true,
		Destinations: dests, PassIntents: intents})
	if errors.Is(err, broker.ErrBadRequest) || errors.Is(err, broker.ErrIntentUnknown) {
		if log != nil {
			log.Warn("the plugin starts without a proxy pass: https:// CONNECTs need a handle in the proxy URL", "reason", err.Error())
		}
		return broker.Issued{}, "", nil
	}
	if err != nil {
		return broker.Issued{}, "", fmt.Errorf("the plugin's proxy pass: %w", err)
	}
	return iss, inv, nil
}

// Renewal timing: a pass is renewed when a third of its remaining life
// has passed, and a failed renewal is retried at retryDelay until the
// pass expires.
const (
	retryDelay    = 5 * time.Second
	minRenewDelay = time.Second
)

// ErrPassLost: a plugin's pass can no longer be renewed — revoked,
// expired, lost by the handle store, or at broker.max_pass_lifetime — so
// the plugin's pass-attributed CONNECTs fail until it restarts.
var ErrPassLost = errors.New("the plugin's proxy pass can no longer be renewed")

// Keeper keeps one plugin process's pass alive and remembers whether it
// was lost, for the plugin's health probe: the supervisor restarts a
// plugin whose pass is lost, and the restarted plugin gets a new one.
type Keeper struct {
	lost    atomic.Pointer[error]
	verify  chan chan error // a probe asks for a renewal now
	stopped chan struct{}   // closed when keepPass has returned
}

// Keep runs keepPass in the background until done closes.
func (k *Keeper) Keep(done <-chan struct{}, b broker.API, plugin string, pass broker.Issued, log *slog.Logger) {
	k.verify, k.stopped = make(chan chan error), make(chan struct{})
	go func() {
		defer close(k.stopped)
		if err := keepPass(done, k.verify, b, plugin, pass, log); err != nil {
			k.lost.Store(&err)
		}
	}()
}

// Verify renews the pass now, for a health probe: a pass revoked (say,
// by an operator's handle revoke --plugin) is noticed at the next probe,
// not at the next scheduled renewal. It returns Err afterwards; nil while
// the broker cannot be reached (the pass is then not known to be lost).
func (k *Keeper) Verify(ctx context.Context) error {
	if k.verify == nil {
		return k.Err()
	}
	reply := make(chan error, 1)
	select {
	case k.verify <- reply:
	case <-k.stopped:
		return k.Err()
	case <-ctx.Done():
		return k.Err()
	}
	select {
	case <-reply:
	case <-k.stopped:
	case <-ctx.Done():
	}
	return k.Err()
}

// Err is nil while the pass is kept (or the plugin has none), else why it
// was lost (ErrPassLost).
func (k *Keeper) Err() error {
	if e := k.lost.Load(); e != nil {
		return *e
	}
	return nil
}

// keepPass renews pass (as Pass returned it) until done closes (the
// plugin exited), so a plugin keeps its pass however long it runs while
// a pass its host can no longer renew dies within broker.pass_ttl. It
// returns nil when done closes or pass is zero, and ErrPassLost, said in
// log too, once the pass is revoked or expired, or has expired at
// broker.max_pass_lifetime.
func keepPass(done <-chan struct{}, verify <-chan chan error, b broker.API, plugin string, pass broker.Issued, log *slog.Logger) error {
	if pass.Handle == "" {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	expires := pass.ExpiresAt
	wait := max(time.Until(expires)/3, minRenewDelay)
	for {
		t := time.NewTimer(wait)
		var reply chan error
		select {
		case <-done:
			t.Stop()
			return nil
		case <-t.C:
		case reply = <-verify:
			t.Stop()
		}
		// answer wakes a Verify once this renewal kept the pass; when
		// it is lost, Verify wakes as keepPass returns (Keeper.stopped).
		answer := func() {
			if reply != nil {
				close(reply)
				reply = nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), retryDelay)
		iss, err := b.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: "pass-renew", Pass: true, Renew: pass.Handle})
		cancel()
		left := time.Until(expires)
		switch {
		case errors.Is(err, broker.ErrHandleUnknown) || errors.Is(err, broker.ErrHandleRevoked) || errors.Is(err, broker.ErrHandleExpired):
			log.Error("the plugin's proxy pass can no longer be renewed: the host restarts the plugin at its next health probe",
				"handle_fp", pass.Fingerprint, "reason", err.Error())
			return fmt.Errorf("%w: %w", ErrPassLost, err)
		case err != nil && left > 0:
			log.Warn("renewing the plugin's proxy pass failed; retrying", "handle_fp", pass.Fingerprint,
				"reason", err.Error(), "expires_in", left.Round(time.Second).String())
			wait = min(retryDelay, max(left, minRenewDelay))
			answer()
			continue
		case err != nil:
			log.Error("the plugin's proxy pass expired before it could be renewed: the host restarts the plugin at its next health probe",
				"handle_fp", pass.Fingerprint, "reason", err.Error())
			return fmt.Errorf("%w: it expired while the broker could not be reached", ErrPassLost)
		case !iss.ExpiresAt.After(expires):
			log.Warn("the plugin's proxy pass reached broker.max_pass_lifetime: the plugin is restarted when it expires",
				"handle_fp", pass.Fingerprint, "expires_at", expires.UTC().Format(time.RFC3339))
			answer()
			t := time.NewTimer(time.Until(expires))
			defer t.Stop()
			for {
				select {
				case <-done:
					return nil
				case <-t.C:
					return fmt.Errorf("%w: it reached broker.max_pass_lifetime", ErrPassLost)
				case r := <-verify:
					close(r) // kept until it expires
				}
			}
		}
		answer()
		expires = iss.ExpiresAt
		wait = max(time.Until(expires)/3, minRenewDelay)
	}
}
