package mcp

import (
	"context"
	"errors"
)

// errSessionEnded ends the calls of a session its client ended (or the
// server closing): the SDK's session waits for its calls before it
// closes, and nobody is left to tell their outcome.
var errSessionEnded = errors.New("the MCP session ended")

// inflight are the calls in flight of one session, and the principal
// that made them.
type inflight struct {
	principal string
	cancels   map[*context.CancelCauseFunc]struct{}
}

// track registers cancel as a call in flight of session sid, made by
// principal; the returned func unregisters it.
func (s *Server) track(sid, principal string, cancel context.CancelCauseFunc) func() {
	if sid == "" {
		return func() {}
	}
	key := &cancel
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[sid]
	if c == nil {
		c = &inflight{principal: principal, cancels: map[*context.CancelCauseFunc]struct{}{}}
		s.calls[sid] = c
	}
	c.cancels[key] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(c.cancels, key)
		if len(c.cancels) == 0 && s.calls[sid] == c {
			delete(s.calls, sid)
		}
	}
}

// endCalls cancels the calls in flight of session sid when principal
// made them ("" for any: the server closing).
func (s *Server) endCalls(sid, principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.calls {
		if sid != "" && id != sid || principal != "" && c.principal != principal {
			continue
		}
		for cancel := range c.cancels {
			(*cancel)(errSessionEnded)
		}
	}
}
