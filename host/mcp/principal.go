package mcp

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
)

// principalKey is where the principal rides in the SDK's token info.
const principalKey = "dev.airlock/principal"

// connAuthenticated stands in for a bearer where the connection itself
// named the caller (a client certificate, the unix socket's peer): the
// SDK's session binding wants a bearer, and its verifier below never
// reads it.
const connAuthenticated = "airlock-connection-authenticated"

// principals hands the principal the control API's authentication put
// in each request's context to the SDK as token info, whose UserID binds
// a session to the principal that opened it (a request of another
// principal on it is refused 403). A request without one is refused
// 401: this handler is served only behind control.Auth.
func (s *Server) principals(next http.Handler) http.Handler {
	verified := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := control.CallerFrom(r.Context())
		if !ok || p.ID == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.ID, Extra: map[string]any{principalKey: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := control.CallerFrom(r.Context())
		if !ok || p.ID == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "unauthenticated",
				"detail": "the MCP endpoint is served behind the control API's authentication, which named no caller"})
			return
		}
		if sid := r.Header.Get(sessionHeader); r.Method == http.MethodDelete && sid != "" {
			// The SDK closes a session only once its calls end: end
			// those of the session's own principal first.
			s.endCalls(sid, p.ID)
		}
		if r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+connAuthenticated)
		}
		if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" {
			s.newSession(w, r, p.ID, verified)
			return
		}
		verified.ServeHTTP(w, r)
	})
}

// principalOf is the principal a call's request was authenticated as.
func principalOf(req *mcp.CallToolRequest) (host.Principal, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return host.Principal{}, false
	}
	p, ok := req.Extra.TokenInfo.Extra[principalKey].(host.Principal)
	return p, ok && p.ID != ""
}
