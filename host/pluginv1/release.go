package pluginv1

// Release stops the HostService server and closes the connection the host
// opened for a provider that exited without Shutdown; a later call is
// refused as not serving.
func (p *Plugin) Release() {
	p.mu.Lock()
	closed := p.closed
	p.closed = true
	p.mu.Unlock()
	if !closed {
		p.cleanup()
	}
}
