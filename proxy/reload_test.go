package proxy

import (
	"fmt"
	"testing"
)

// A reload's rates apply to the next request: a handle refused under the
// old burst is admitted under the new one, and refused again once the new
// burst is spent.
func TestSetLimits(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		// Rates so low that nothing refills during the test.
		c.Limits.PerHandleRPS, c.Limits.PerHandleBurst = 0.001, 1
	})
	h := f.issue(t, "api.write", "inv-reload")
	var codes []int
	get := func() {
		code, _, _ := do(t, f.client(h), "GET", f.url("/x"), nil, "")
		codes = append(codes, code)
	}
	get()
	get()
	next := f.proxy.cfg.Limits
	next.PerHandleRPS, next.PerHandleBurst = 0.001, 2
	f.proxy.SetLimits(next)
	get()
	get()
	get()
	if fmt.Sprint(codes) != "[200 429 200 200 429]" {
		t.Fatalf("burst 1, then reloaded to 2: %v", codes)
	}
}
