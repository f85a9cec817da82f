package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/broker"
	hostpolicy "github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/config"
)

// Settings a serve reload applies in place: the intent bindings and the
// request rates. Everything else serve reads is fixed at start; the
// reload names what changed there and that it needs a restart.
var serveReloadable = []string{
	"broker.intents",
	"proxy.limits.per_handle_rps", "proxy.limits.per_handle_burst",
	"proxy.limits.per_plugin_rps", "proxy.limits.per_plugin_burst",
	"proxy.limits.per_plugin_concurrency",
}

// Settings of the config file that airlock host reads; a host reload
// applies host.policy (and rereads its file) and names the others that
// changed as needing a restart. The rest of the file is serve's.
var hostSettings = []string{"host", "state_dir", "log", "broker.api.socket", "broker.api.token_file", "broker.egress_proxy"}

// loadForReload reads and validates the config file as at start.
func loadForReload(path string) (*config.Config, error) {
	next, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := next.Validate(); err != nil {
		return nil, err
	}
	return next, nil
}

// reloadOn calls reload on every value of requests until the node stops;
// with file unset, a request only refreshes the secrets.
func (n *serveNode) reloadOn(requests <-chan os.Signal, file bool) {
	if requests == nil {
		return
	}
	n.goRun(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-requests:
				n.broker.RefreshSecrets()
				if file {
					n.reload()
				} else {
					n.log.Info("reload: secrets refreshed (airlock dev rereads no config file)")
				}
			}
		}
	})
}

// reload rereads the config file, validates it, then applies its intents
// and rates at once; a file that does not load or validate changes
// nothing, and the log says why.
func (n *serveNode) reload() {
	log := n.log.With("config", n.cfg.Path)
	if n.cfg.Path == "" {
		n.log.Info("reload: secrets refreshed; the embedded defaults have no file to reread")
		return
	}
	next, err := loadForReload(n.cfg.Path)
	if err != nil {
		log.Error("config reload refused: the running config stays", "reason", err.Error())
		return
	}
	var applied, restart []string
	for _, k := range config.Changes(n.cfg, next) {
		switch {
		case config.Under(k, "host"):
			// airlock host's own settings: it reloads them itself.
		case reloadableKey(k, serveReloadable) && !n.leasedChange(k, next):
			applied = append(applied, k)
		default:
			restart = append(restart, k)
		}
	}
	cur := *n.cfg
	if slices.ContainsFunc(applied, func(k string) bool { return config.Under(k, "broker.intents") }) {
		cur.Broker.Intents = n.mergeIntents(next.Broker.Intents)
		n.broker.SetIntents(cur.Broker.Intents)
	}
	if slices.ContainsFunc(applied, func(k string) bool { return config.Under(k, "proxy.limits") }) {
		l := &cur.Proxy.Limits
		nl := next.Proxy.Limits
		l.PerHandleRPS, l.PerHandleBurst, l.PerPluginRPS, l.PerPluginBurst = nl.PerHandleRPS, nl.PerHandleBurst, nl.PerPluginRPS, nl.PerPluginBurst
		l.PerPluginConcurrency = nl.PerPluginConcurrency
		n.proxy.SetLimits(*l)
	}
	n.cfg = &cur
	logReload(log, applied, restart)
}

// leasedChange reports a change to an intent bound to a leased secret
// (source vault_lease) before or after: the lease manager keeps its own
// bindings, so those take a restart.
func (n *serveNode) leasedChange(key string, next *config.Config) bool {
	name, ok := strings.CutPrefix(key, "broker.intents.")
	if !ok {
		return false
	}
	return n.cfg.Broker.Intents[name].Secret.Source == broker.SourceVaultLease ||
		next.Broker.Intents[name].Secret.Source == broker.SourceVaultLease
}

// mergeIntents is next with the running bindings of leased intents kept
// as they are (see leasedChange).
func (n *serveNode) mergeIntents(next map[string]broker.Intent) map[string]broker.Intent {
	out := map[string]broker.Intent{}
	for name, in := range next {
		if in.Secret.Source != broker.SourceVaultLease {
			out[name] = in
		}
	}
	for name, in := range n.cfg.Broker.Intents {
		if in.Secret.Source == broker.SourceVaultLease {
			out[name] = in
		}
	}
	return out
}

// reloadOn reloads the host's config file on every value of requests
// until the node stops.
func (n *hostNode) reloadOn(requests <-chan os.Signal, cfg *config.Config) {
	if requests == nil {
		return
	}
	n.goRun(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-requests:
				n.reopenEvidence()
				cfg = n.reload(cfg)
			}
		}
	})
}

// reopenEvidence starts a new evidence segment when the log's file was
// renamed (logrotate's postrotate reload); otherwise it changes nothing.
func (n *hostNode) reopenEvidence() {
	if n.ev == nil {
		return
	}
	if err := n.ev.Reopen(); err != nil {
		n.log.Error("evidence reopen failed: records go on in the file already open", "error", err.Error())
	}
}

// reload rereads the config file and the policy file it names, and
// swaps the policy in at once; it returns the config now in force. A
// file that does not load or validate, or a policy that does not parse,
// changes nothing, and the log says why. Other host settings that
// changed are named as needing a restart.
func (n *hostNode) reload(cfg *config.Config) *config.Config {
	log := n.log.With("config", cfg.Path)
	if cfg.Path == "" {
		n.log.Info("reload: the embedded defaults have no file to reread")
		return cfg
	}
	next, err := loadForReload(cfg.Path)
	if err != nil {
		log.Error("config reload refused: the running config and policy stay", "reason", err.Error())
		return cfg
	}
	policy, err := loadPolicy(next.Host.Policy)
	if err != nil {
		log.Error("policy reload refused: the running config and policy stay", "reason", err.Error())
		return cfg
	}
	if cfg, err = n.reloadPrincipals(cfg, next); err != nil {
		log.Error("control principals reload refused: the running config and policy stay", "reason", err.Error())
		return cfg
	}
	n.h.SetPolicy(policy)
	var applied, restart []string
	for _, k := range config.Changes(cfg, next) {
		switch {
		case k == "host.policy":
			applied = append(applied, k)
		case reloadableKey(k, hostSettings):
			restart = append(restart, k)
		}
	}
	if policy == nil {
		log.Warn("no host.policy: every action will be denied")
	}
	cur := *cfg
	cur.Host.Policy = next.Host.Policy
	log.Info("host policy reloaded", "policy", next.Host.Policy, "rules", policyRules(policy), "digest", policyDigest(policy))
	logReload(log, applied, restart)
	return &cur
}

// loadPolicy loads the policy file; "" is none (every call denied).
func loadPolicy(path string) (*hostpolicy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	p, err := hostpolicy.Load(path)
	if err != nil {
		return nil, fmt.Errorf("host.policy: %w", err)
	}
	return p, nil
}

func policyRules(p *hostpolicy.Policy) int {
	if p == nil {
		return 0
	}
	return len(p.Rules)
}

// policyDigest is the policy's bundle digest, "" for none.
func policyDigest(p *hostpolicy.Policy) string {
	if p == nil {
		return ""
	}
	return p.Digest()
}

// reloadableKey reports whether key is one of settings or inside one.
func reloadableKey(key string, settings []string) bool {
	return slices.ContainsFunc(settings, func(s string) bool { return config.Under(key, s) })
}

// logReload says what a reload applied and what it could not.
func logReload(log *slog.Logger, applied, restart []string) {
	switch {
	case len(applied) == 0 && len(restart) == 0:
		log.Info("config reloaded: no setting changed")
	case len(applied) > 0:
		log.Info("config reloaded", "applied", applied)
	}
	if len(restart) > 0 {
		log.Warn("config changed where a reload cannot apply it: restart to use these settings (the running ones stay)", "restart_needed", restart)
	}
}
