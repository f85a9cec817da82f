package control

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// Authenticator says whether a presented token is the control API's
// (peerauth.Token).
type Authenticator interface {
	Match(presented string) bool
}

// RequireToken wraps the control API so that every request — an
// install above all, the operator's act — must carry the token of
// host.control_token_file as "Authorization: Bearer …". Others are
// answered 401 {"error":"unauthenticated"} before their body is read; the
// log line says why, and echoes nothing the caller sent.
func RequireToken(next http.Handler, auth Authenticator, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		vals := r.Header.Values("Authorization")
		if ok && len(vals) == 1 && auth.Match(tok) {
			next.ServeHTTP(w, r)
			return
		}
		detail := "no token presented: every control API request carries the token of host.control_token_file (Authorization: Bearer)"
		if len(vals) > 0 {
			detail = "the token presented is not the one in host.control_token_file"
		}
		log.Warn("control API: request refused: "+detail, callerAttrs(r)...)
		peerauth.Refused("control API", "token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-control"`)
		writeError(w, http.StatusUnauthorized, "unauthenticated", detail)
	})
}

// callerAttrs name who sent r in a refusal's log line: on the control
// socket RemoteAddr is the peer's "uid=U pid=P" (peerauth.Peer), over TCP
// its address.
func callerAttrs(r *http.Request) []any { return []any{"peer", r.RemoteAddr} }
