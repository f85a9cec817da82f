package daemon

import (
	"net/http"
	"net/http/pprof"

	"github.com/airlock-dev/airlock/internal/admin"
)

// mountPprof adds Go's profiling endpoints (/debug/pprof/…) to the admin
// listener, never to the proxy's: only when an operator asks for them
// (airlock serve --pprof), because a goroutine dump names internal state
// and a CPU profile costs the proxy while it runs. The admin listener is
// on loopback unless configured otherwise.
func mountPprof(a *admin.Server) {
	a.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	a.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	a.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	a.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	a.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}
