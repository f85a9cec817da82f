package api

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Broker API bounds. Whoever reaches the API is trusted to mint handles,
// but not to exhaust the process: a request is refused before it is
// decoded when it is larger than any legitimate one, and calls beyond the
// concurrency bound wait briefly or are refused, so memory stays bounded
// however many requests arrive at once.
const (
	// maxRequestBytes is the largest request message decoded. The largest
	// legitimate request, an IssueHandleRequest with every field and list
	// at the bounds Issue enforces (MaxDestinations destinations of
	// MaxDestinationBytes with MaxMethods methods, MaxDestinations pass
	// intents, identifiers of MaxIDBytes), is about 100 KiB.
	maxRequestBytes = 128 << 10
	// maxHeaderListBytes bounds a call's metadata (the HTTP/2 header list).
	maxHeaderListBytes = 16 << 10
	// maxConcurrentCalls is how many calls run at once on a Service (over
	// all its listeners and connections), and how many streams one
	// connection may open. As many more may wait for a slot, until their
	// deadline; beyond that a call fails at once with ResourceExhausted
	// ("busy").
	maxConcurrentCalls = 64
)

// callLimit bounds the calls running (run) and waiting (wait) at once.
type callLimit struct {
	run, wait chan struct{}
}

// ServerOptions are the options every gRPC server serving s must be built
// with: message, metadata and concurrency bounds shared by all of s's
// listeners.
func (s *Service) ServerOptions() []grpc.ServerOption {
	s.limitOnce.Do(func() {
		s.limit = &callLimit{run: make(chan struct{}, maxConcurrentCalls), wait: make(chan struct{}, maxConcurrentCalls)}
	})
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRequestBytes),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.MaxConcurrentStreams(maxConcurrentCalls),
		grpc.ForceServerCodecV2(newBoundedCodec()),
		grpc.ChainUnaryInterceptor(s.limit.unary),
	}
	if s.Tracer != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(traceIn(s.Tracer)))
	}
	return opts
}

// errBusy: the broker API is running and queueing as many calls as it
// allows.
var errBusy = status.Error(codes.ResourceExhausted, "busy: the broker API is at its concurrency bound; retry")

func (l *callLimit) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	select {
	case l.run <- struct{}{}:
	default:
		select {
		case l.wait <- struct{}{}:
		default:
			return nil, errBusy
		}
		select {
		case l.run <- struct{}{}:
			<-l.wait
		case <-ctx.Done():
			<-l.wait
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	defer func() { <-l.run }()
	return h(ctx, req)
}
