// Command executa-tickets is a sample Executa plugin (JSON-RPC 2.0 over
// stdin/stdout, one object per line). Its tool "summarize" fetches tickets
// from the ticket API with the TICKETS_API_KEY credential — a handle,
// used where the key would go, swapped for the key by Airlock's egress
// proxy — asks the host to sample a summary, and keeps it in APS storage.
// It keeps reading stdin until EOF, as every Executa plugin must.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

var manifest = map[string]any{
	"name": "executa-tickets", "version": "0.1.0", "description": "Summarizes open tickets",
	"host_capabilities": []string{"llm.sample", "aps.kv"},
	"tools": []any{map[string]any{"name": "summarize", "timeout": 30,
		"parameters": []any{map[string]any{"name": "base_url", "type": "string"}}}},
	"credentials": []any{map[string]any{"name": "TICKETS_API_KEY", "sensitive": true}},
}

type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

var (
	in  = bufio.NewReaderSize(os.Stdin, 1<<20)
	out = json.NewEncoder(os.Stdout)
	seq = 0
)

func reply(id json.RawMessage, result any) {
	_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// reverse sends a request to the host and reads its answer (the host
// answers a reverse request before the invoke it serves ends).
func reverse(method string, params map[string]any) (json.RawMessage, error) {
	seq++
	id := fmt.Sprintf("rev-%d", seq)
	_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	line, err := in.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, err
	}
	if f.Error != nil {
		return nil, fmt.Errorf("%s: %d %s", method, f.Error.Code, f.Error.Message)
	}
	return f.Result, nil
}

func main() {
	for {
		line, err := in.ReadBytes('\n')
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var f frame
		if json.Unmarshal(line, &f) != nil || f.Method == "" {
			continue
		}
		switch f.Method {
		case "initialize":
			reply(f.ID, map[string]any{"protocolVersion": "2.0", "server_info": map[string]string{"name": "executa-tickets", "version": "0.1.0"},
				"capabilities": map[string]any{"sampling": map[string]any{}}})
		case "describe":
			reply(f.ID, manifest)
		case "health":
			reply(f.ID, map[string]string{"status": "ready"})
		case "invoke":
			reply(f.ID, summarize(f.Params))
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": f.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
		}
	}
}

func summarize(raw json.RawMessage) map[string]any {
	var p struct {
		Arguments struct {
			BaseURL string `json:"base_url"`
		} `json:"arguments"`
		Context struct {
			Credentials map[string]string `json:"credentials"`
			InvokeID    string            `json:"invoke_id"`
		} `json:"context"`
	}
	fail := func(err error) map[string]any { return map[string]any{"success": false, "error": err.Error()} }
	if err := json.Unmarshal(raw, &p); err != nil {
		return fail(err)
	}
	// The handle goes where the key would; HTTP_PROXY sends it to Airlock.
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(p.Arguments.BaseURL, "/")+"/api/tickets", nil)
	req.Header.Set("Authorization", "Bearer "+p.Context.Credentials["TICKETS_API_KEY"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	var tickets []map[string]string
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tickets); err != nil {
		return fail(fmt.Errorf("ticket API answered %s", resp.Status))
	}
	titles := []string{}
	for _, t := range tickets {
		titles = append(titles, t["title"])
	}
	sample, err := reverse("sampling/createMessage", map[string]any{"invoke_id": p.Context.InvokeID, "maxTokens": 200,
		"messages": []any{map[string]any{"role": "user", "content": map[string]string{"type": "text",
			"text": "Summarize these tickets: " + strings.Join(titles, "; ")}}}})
	if err != nil {
		return fail(err)
	}
	var s struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
		Model string `json:"model"`
	}
	_ = json.Unmarshal(sample, &s)
	if _, err := reverse("storage/set", map[string]any{"invoke_id": p.Context.InvokeID, "scope": "user",
		"key": "last_summary", "value": s.Content.Text}); err != nil {
		return fail(err)
	}
	return map[string]any{"success": true, "data": map[string]any{"tickets": len(tickets), "summary": s.Content.Text,
		"model": s.Model, "stored_as": "user/last_summary"}}
}
