package daemon

import (
	"context"
	"time"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// tracingShutdown bounds the export of the spans still queued at exit.
const tracingShutdown = 5 * time.Second

// startTracing starts the tracer provider of cfg.Tracing (nil when
// off) for the proxy's spans. It is shut down after the listeners have
// stopped (closers run last added first, after the goroutines end): the
// queued spans are exported, for at most tracingShutdown, and the
// exporter's goroutine has ended when the node has stopped.
func (n *serveNode) startTracing(cfg *config.Config, version string) error {
	tr, err := tracing.New(cfg.Tracing, tracing.Options{Service: "airlock-serve", Version: version, Logger: n.log, Registerer: n.registry})
	if err != nil || tr == nil {
		return err
	}
	n.tracing = tr
	n.closers = append(n.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			n.log.Warn("tracing: shutdown", "error", err.Error())
		}
	})
	n.log.Info("tracing on: spans are exported over OTLP/HTTP", "endpoint", cfg.Tracing.Endpoint, "sample_ratio", *cfg.Tracing.SampleRatio)
	return nil
}
