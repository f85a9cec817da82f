// Package serve runs an HTTP server until its context ends, then shuts it
// down gracefully: the shared lifecycle of Airlock's listeners.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace bounds how long in-flight requests may finish after the
// context ends.
const ShutdownGrace = 10 * time.Second

// HTTP serves srv on l until ctx ends, then shuts it down, waiting up to
// ShutdownGrace for requests in flight. It returns nil after a clean
// shutdown.
func HTTP(ctx context.Context, srv *http.Server, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// Every calls f with the tick time every interval until ctx ends: the
// shared loop behind the periodic sweeps (handle store, upload GC, key
// refresh, rate-limit buckets).
func Every(ctx context.Context, interval time.Duration, f func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
