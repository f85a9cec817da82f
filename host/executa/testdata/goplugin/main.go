// Command goplugin is a minimal Executa plugin in Go for the host's tests:
// it negotiates v2, describes one tool, answers invoke and health, and
// exits at stdin EOF.
package main

import (
	"bufio"
	"encoding/json"
	"os"
)

func main() {
	out := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 2<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
				Context   struct {
					InvokeID string `json:"invoke_id"`
				} `json:"context"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.Method == "" {
			continue
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2.0", "server_info": map[string]string{"name": "go-tool", "version": "1.0.0"},
				"capabilities": map[string]any{}}
		case "describe":
			result = map[string]any{"name": "go-tool", "version": "1.0.0",
				"tools": []any{map[string]any{"name": "hello", "parameters": []any{map[string]any{"name": "who", "type": "string"}}}}}
		case "invoke":
			var args struct {
				Who string `json:"who"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			result = map[string]any{"success": true, "data": map[string]string{"greeting": "hello " + args.Who,
				"invoke_id": req.Params.Context.InvokeID}}
		case "health":
			result = map[string]any{"status": "ready"}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
}
