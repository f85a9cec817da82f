package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

func (p *Process) initialize(ctx context.Context) error {
	params := map[string]any{
		"protocolVersion": ProtocolV2,
		"clientInfo":      map[string]string{"name": "airlock", "version": "1.0"},
		"capabilities": map[string]any{
			"sampling": map[string]any{"modalities": []string{"text"}, "maxTokensPerCall": p.opts.MaxTokensPerCall,
				"maxCallsPerInvoke": p.opts.MaxCallsPerInvoke, "responseFormat": []string{"json_object", "json_schema"}},
			"fileTransport": true,
		},
	}
	m, err := p.call(ctx, "initialize", params, p.opts.Timeouts.Initialize)
	if errors.Is(err, ErrPluginExited) {
		return err
	}
	// Timeout, -32601 or any other error frame: silently protocol 1.1.
	p.Protocol = ProtocolV11
	if err != nil || m.Error != nil {
		return nil
	}
	var res struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage            `json:"server_info"`
		ServerInfoCamel json.RawMessage            `json:"serverInfo"`
	}
	if json.Unmarshal(m.Result, &res) != nil || res.ProtocolVersion != ProtocolV2 {
		return nil
	}
	p.Protocol, p.Capabilities = ProtocolV2, map[string]json.RawMessage{}
	for k, v := range res.Capabilities {
		if k == "sampling" || k == "storage" || k == "fileTransport" || k == "files" {
			p.Capabilities[k] = v // only what the host offered can be negotiated
		}
	}
	p.ServerInfo = res.ServerInfo
	if len(p.ServerInfo) == 0 {
		p.ServerInfo = res.ServerInfoCamel
	}
	return nil
}

func (p *Process) describe(ctx context.Context) error {
	timeout := p.opts.Timeouts.Describe
	if p.cfg.Onefile && p.cfg.FirstRun {
		timeout = p.opts.Timeouts.DescribeOnefile
	}
	m, err := p.call(ctx, "describe", map[string]any{}, timeout)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	if m.Error != nil {
		return fmt.Errorf("describe: the plugin answered with error code %d", m.Error.Code)
	}
	man, err := ParseManifest(m.Result)
	if err != nil {
		return fmt.Errorf("describe: %w:\n%w", ErrInvalidManifest, err)
	}
	p.Manifest = man
	return nil
}
