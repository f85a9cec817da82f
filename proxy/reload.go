package proxy

import "errors"

// SetLimits applies new request rates and the per-plugin concurrency cap
// (a config reload): PerHandleRPS, PerHandleBurst, PerPluginRPS,
// PerPluginBurst and PerPluginConcurrency of c, after WithDefaults and
// Validate. Buckets start full under the new rates; requests in flight
// finish under the old cap. The scope and every other limit (sizes,
// timeouts) are fixed at New: the caller restarts for those.
func (s *Server) SetLimits(c LimitsConfig) {
	old := s.limits.Load()
	next := old.cfg
	next.PerHandleRPS, next.PerHandleBurst = c.PerHandleRPS, c.PerHandleBurst
	next.PerPluginRPS, next.PerPluginBurst = c.PerPluginRPS, c.PerPluginBurst
	next.PerPluginConcurrency = c.PerPluginConcurrency
	lim := newLimiter(next)
	lim.global = old.global
	s.limits.Store(lim)
}

// InterceptReady reports an intercept CA that is configured but not
// loaded yet (Vault was down at start): CONNECT is refused until it is.
func (s *Server) InterceptReady() error {
	if s.caStore != nil && s.ca.Load() == nil {
		return errInterceptNotLoaded
	}
	return nil
}

var errInterceptNotLoaded = errors.New("the intercept CA is not loaded yet (retried every proxy.intercept.reload)")
