package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inert is a plugin's text as an agent may be shown it: at most n bytes
// (cut at a character), valid UTF-8, and with every control, format or
// invisible character (escape sequences, carriage returns, bidi
// overrides, zero-width and tag characters) as U+FFFD, so that it can
// neither rewrite what a terminal or a client shows around it nor hide
// text from a person that a model reads. Newlines and tabs stay.
func inert(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
			r == '\u2028' || r == '\u2029') {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// quoted is a plugin's text on one line, in Go quotes: escaped, so that
// it cannot end the marking around it.
func quoted(s string) string {
	return strconv.QuoteToGraphic(inert(s, MaxProgressMessage))
}

// errUnknownTool is what a call of a tool not listed is told: the SDK's
// own error repeats the name the request gave.
var errUnknownTool = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
	Message: "unknown tool: it is not (or no longer) listed; list the tools again"}

// noEcho keeps the SDK's protocol errors of tools/call from repeating a
// value of the request.
func noEcho(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var je *jsonrpc.Error
		if method == "tools/call" && errors.As(err, &je) && strings.HasPrefix(je.Message, "unknown tool") {
			return nil, errUnknownTool
		}
		return res, err
	}
}

// inertSchema is a plugin's JSON Schema with the text a person or a
// model reads in it (each "description" and "title") made inert; the
// values it constrains (enum, default, const, pattern) stay as they are.
// A schema that is not JSON is returned as it is (the caller checks it).
func inertSchema(raw []byte) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "description" || k == "title") {
					x[k] = inert(s, MaxDescription)
					continue
				}
				switch k {
				case "enum", "default", "const", "examples":
					continue // values, not text about them
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}
