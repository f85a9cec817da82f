package host

import (
	"context"
	"fmt"
	"slices"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/egressenv"
)

// egressEnv is the proxy environment of a provider about to start in
// work: HTTP_PROXY, and with the intercept CA (unless the plugin opted
// out) the CA copy, HTTPS_PROXY carrying the plugin's pass for the hosts
// its manifest declares, and the CA variables. The pass is returned too,
// for an egressenv.Keeper once the plugin runs.
func (p *Plugin) egressEnv(ctx context.Context, work string) ([]string, broker.Issued, error) {
	opts := p.opts
	var pass broker.Issued
	if opts.InterceptCAFile == "" || slices.Contains(opts.HTTPSProxyOptOut, p.inst.Name) {
		return egressenv.Vars(opts.EgressProxy, "", ""), pass, nil
	}
	ca, err := egressenv.InstallCA(opts.InterceptCAFile, work)
	if err != nil {
		return nil, pass, fmt.Errorf("installing the intercept CA certificate for the plugin: %w", err)
	}
	var dests []broker.Destination
	for _, ci := range p.inst.Manifest.GetCredentialIntents() {
		for _, d := range ci.GetDestinations() {
			dests = append(dests, broker.Destination{Host: d.GetHost(), Port: int(d.GetPort())})
		}
	}
	if len(dests) > 0 && opts.Broker != nil {
		if pass, err = egressenv.Pass(ctx, opts.Broker, p.inst.Name, broker.Places(dests), nil, p.log); err != nil {
			return nil, pass, err
		}
	}
	return egressenv.Vars(opts.EgressProxy, ca, pass.Handle), pass, nil
}
