package mcp

import (
	"encoding/json"
	"net/http"
)

// DefaultMaxSessions is Options.MaxSessions's default.
const DefaultMaxSessions = 64

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// admit reserves room for a new session of principal, reporting false
// when it holds Options.MaxSessions already; done ends the reservation.
// Sessions are counted among those the SDK holds now, so a session
// closed in any way (DELETE, idle, Close) makes room.
func (s *Server) admit(principal string) (ok bool) {
	limit := s.opts.MaxSessions
	if limit <= 0 {
		limit = DefaultMaxSessions
	}
	live := map[string]bool{}
	for ss := range s.srv.Sessions() {
		live[ss.ID()] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.opening[principal]
	for id, p := range s.owners {
		switch {
		case !live[id]:
			delete(s.owners, id)
		case p == principal:
			n++
		}
	}
	if n >= limit {
		return false
	}
	s.opening[principal]++
	return true
}

// opened ends principal's reservation, recording the session it opened
// (none: id "").
func (s *Server) opened(principal, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opening[principal]--; s.opening[principal] <= 0 {
		delete(s.opening, principal)
	}
	if id != "" {
		s.owners[id] = principal
	}
}

// newSession serves a request that opens a session (one without a
// session id), within principal's bound.
func (s *Server) newSession(w http.ResponseWriter, r *http.Request, principal string, next http.Handler) {
	if !s.admit(principal) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "too_many_sessions",
			"detail": "the principal holds as many MCP sessions as the host allows: end one (DELETE) or wait for one to go idle"})
		return
	}
	sw := &sessionWriter{ResponseWriter: w}
	defer func() { s.opened(principal, sw.id) }()
	next.ServeHTTP(sw, r)
}

// sessionWriter notes the session id a response names.
type sessionWriter struct {
	http.ResponseWriter
	id string
}

func (w *sessionWriter) WriteHeader(code int) {
	w.id = w.Header().Get(sessionHeader)
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(b []byte) (int, error) {
	if w.id == "" {
		w.id = w.Header().Get(sessionHeader)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
