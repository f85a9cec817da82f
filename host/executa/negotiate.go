package executa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// Read field by field, so one odd field does not cost the session v2.
	var res map[string]json.RawMessage
	if json.Unmarshal(m.Result, &res) != nil || !isV2(res["protocolVersion"], res["protocol_version"]) {
		return nil
	}
	p.Protocol, p.Capabilities = ProtocolV2, map[string]json.RawMessage{}
	// "capabilities" is the lifecycle page's spelling; the SDKs answer
	// with "client_capabilities" (MCP's shape) and an empty
	// "capabilities". Both count.
	for _, key := range []string{"capabilities", "client_capabilities", "clientCapabilities"} {
		var caps map[string]json.RawMessage
		if json.Unmarshal(res[key], &caps) != nil {
			continue
		}
		for k, v := range caps {
			if k == "sampling" || k == "storage" || k == "fileTransport" || k == "files" {
				p.Capabilities[k] = v // only what the host offered can be negotiated
			}
		}
	}
	for _, key := range []string{"server_info", "serverInfo"} {
		if len(res[key]) > 0 && string(res[key]) != "null" {
			p.ServerInfo = res[key]
			break
		}
	}
	return nil
}

// isV2 accepts "2.0", "2" and the number 2 as protocol 2.0.
func isV2(vals ...json.RawMessage) bool {
	for _, v := range vals {
		var s string
		if json.Unmarshal(v, &s) == nil && (s == ProtocolV2 || s == "2") {
			return true
		}
		var n float64
		if json.Unmarshal(v, &n) == nil && n == 2 {
			return true
		}
	}
	return false
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
		// One line, each problem after "; ": it is read in a log line and
		// in `airlock plugins`, where a newline turned into "; " left a
		// stray ":;".
		return fmt.Errorf("describe: %w: %s", ErrInvalidManifest, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	p.Manifest = man
	return nil
}
