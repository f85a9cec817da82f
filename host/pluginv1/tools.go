package pluginv1

import (
	"strings"

	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

var _ host.ToolLister = (*Plugin)(nil)

// Tools lists every method Prepare would dispatch: each method with a
// rule, of each service, of each port the manifest names that the host
// serves, looked up now (a port installed since the launch is listed).
// The description is the method's leading comment in the host's port
// file, when it kept one.
func (p *Plugin) Tools() []host.Tool {
	var out []host.Tool
	for _, pkg := range p.inst.Manifest.GetPorts() {
		f, ok := p.opts.Ports.Lookup(pkg)
		if !ok {
			continue
		}
		for i := range f.Services().Len() {
			sd := f.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				rule, err := plugin.RuleOf(md)
				if err != nil {
					continue
				}
				out = append(out, host.Tool{Method: string(sd.FullName()) + "/" + string(md.Name()),
					Description: strings.TrimSpace(f.SourceLocations().ByDescriptor(md).LeadingComments),
					Input:       md.Input(), Risk: riskOf(rule.GetRiskClass()), SideEffect: sideEffect(rule.GetDeclaredSideEffect()),
					DryRun: rule.GetDryRunSupported()})
			}
		}
	}
	return out
}

// sideEffect names a declared side effect; "" for none stated.
func sideEffect(s pb.SideEffect) string {
	switch s {
	case pb.SideEffect_SIDE_EFFECT_NONE:
		return "none"
	case pb.SideEffect_SIDE_EFFECT_READ:
		return "read"
	case pb.SideEffect_SIDE_EFFECT_WRITE:
		return "write"
	case pb.SideEffect_SIDE_EFFECT_DESTRUCTIVE:
		return "destructive"
	default:
		return ""
	}
}
