package pluginv1

import (
	"context"
	"sort"

	"github.com/airlock-dev/airlock/host"
)

// PortResult describes one port: the answer of the control API's
// POST /v1/ports, and each entry of GET /v1/ports.
type PortResult struct {
	Name     string         `json:"name"`
	Source   string         `json:"source"`           // compiled | installed
	SHA256   string         `json:"sha256,omitempty"` // of an installed port's descriptor set
	Replaced bool           `json:"replaced,omitempty"`
	Methods  []MethodReview `json:"methods,omitempty"`
	// Refused, on an installed port the host does not serve, says why
	// (a stored set whose digest is not the pinned one, say).
	Refused string `json:"refused,omitempty"`
}

// PortInstaller installs and removes ports while the host runs
// (control.Handler.EnablePorts): each change is served, or stops being
// served, at once, with no restart.
type PortInstaller struct {
	Ports              *host.PortSet
	PortsDir, Lockfile string
	// Record, when set, appends a host-authored evidence record of each
	// change (lifecycle.port_installed, lifecycle.port_removed).
	Record func(typ string, data map[string]any)
	// OnChange, when set, is told after each port installed or removed
	// (the host's Host.PortsChanged: a plugin's tools changed).
	OnChange func()
}

func (in *PortInstaller) changed() {
	if in.OnChange != nil {
		in.OnChange()
	}
}

func (in *PortInstaller) record(typ string, data map[string]any) {
	if in.Record != nil {
		in.Record(typ, data)
	}
}

// InstallPort reviews, stores, pins and serves a descriptor set (see
// InstallPort); its result is a PortResult.
func (in *PortInstaller) InstallPort(_ context.Context, set []byte, replace bool) (any, error) {
	res, err := InstallPort(set, replace, in.PortsDir, in.Lockfile, in.Ports)
	if err != nil {
		return nil, err
	}
	if !res.Same {
		rules := map[string]string{}
		for _, m := range res.Port.Methods {
			rules[m.Method] = m.RiskClass
		}
		in.record("lifecycle.port_installed", map[string]any{"port": res.Port.Name, "sha256": res.Port.SHA256, "replaced": res.Replaced, "risk_classes": rules})
		in.changed()
	}
	return PortResult{Name: res.Port.Name, Source: "installed", SHA256: res.Port.SHA256, Replaced: res.Replaced, Methods: res.Port.Methods}, nil
}

// RemovePort stops serving an installed port and removes it (see
// RemovePort).
func (in *PortInstaller) RemovePort(_ context.Context, name string) (any, error) {
	if err := RemovePort(name, in.PortsDir, in.Lockfile, in.Ports); err != nil {
		return nil, err
	}
	in.record("lifecycle.port_removed", map[string]any{"port": name})
	in.changed()
	return PortResult{Name: name, Source: "installed"}, nil
}

// ListPorts is every port the host serves, compiled and installed, with
// its review, and every installed port it refused, with why.
func (in *PortInstaller) ListPorts(context.Context) (any, error) {
	lf, err := ReadLockfile(in.Lockfile)
	if err != nil {
		return nil, err
	}
	var out []PortResult
	for _, name := range in.Ports.Names() {
		fd, ok := in.Ports.Lookup(name)
		if !ok {
			continue
		}
		r := PortResult{Name: name, Source: "compiled"}
		if !in.Ports.Compiled(name) {
			r.Source, r.SHA256 = "installed", lf.Ports[name].SHA256
		}
		r.Methods, _ = reviewPort(fd)
		out = append(out, r)
	}
	for name, why := range in.Ports.Refused() {
		out = append(out, PortResult{Name: name, Source: "installed", SHA256: lf.Ports[name].SHA256, Refused: why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return map[string]any{"ports": out}, nil
}
