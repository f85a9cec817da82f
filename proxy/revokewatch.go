package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// A request/response exchange is checked once, when it starts. A stream
// (an HTTP/2 stream such as a gRPC call, a WebSocket) may outlive its
// handle or the plugin pass that opened its tunnel, so while it lasts
// the credentials it rests on are resolved again every
// proxy.limits.stream_check; once
// one is revoked or expired the stream's context ends with
// errCredentialGone, which cuts the stream within about one interval.

// DefaultStreamCheck is how often a long-lived stream's credentials are
// resolved again.
const DefaultStreamCheck = 250 * time.Millisecond

// errCredentialGone ends a stream whose handle or pass was revoked or
// expired while it ran.
var errCredentialGone = errors.New("the stream's credential was revoked or expired")

// watchCredentials returns a context that ends with errCredentialGone
// when one of handles stops resolving, and a stop function that must be
// called when the stream is over. A handle store that cannot be reached
// does not end the stream (its requests were admitted; the next one is
// refused if the store is still down). Empty handles are skipped.
func (s *Server) watchCredentials(ctx context.Context, handles ...string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	var live []string
	for _, h := range handles {
		if h != "" {
			live = append(live, h)
		}
	}
	if len(live) == 0 {
		return ctx, func() { cancel(nil) }
	}
	every := s.cfg.Limits.StreamCheck // defaulted and bounded by New
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, h := range live {
				if _, err := s.broker.Resolve(ctx, h); err != nil && !errors.Is(err, broker.ErrStoreUnavailable) && ctx.Err() == nil {
					cancel(errCredentialGone)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// credentialGone reports whether ctx ended because its stream's
// credential was revoked or expired.
func credentialGone(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errCredentialGone)
}
