package plugin

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// Bounds of the refusal reports.
const (
	// reportQueue refusals wait to be reported; more are dropped (the
	// host still counts those it hears of, and a flood shows).
	reportQueue = 64
	// reportTimeout bounds one report.
	reportTimeout = 5 * time.Second
)

// reporter tells the host, over a HostService connection of its own, of
// each call the guard refused: the provider is the only one that sees
// them, and its host is the one that logs and counts refusals.
type reporter struct {
	addr, key string
	queue     chan refusal
	ctx       context.Context
	stop      context.CancelFunc
	done      chan struct{}
}

// startReporter reports to the HostService at addr (HostAddrEnv's
// form); close stops it.
func startReporter(addr, key string) *reporter {
	ctx, stop := context.WithCancel(context.Background())
	r := &reporter{addr: addr, key: key, queue: make(chan refusal, reportQueue), ctx: ctx, stop: stop, done: make(chan struct{})}
	go r.run()
	return r
}

// report queues f without waiting: a refused caller never holds up the
// provider.
func (r *reporter) report(f refusal) {
	select {
	case r.queue <- f:
	default:
	}
}

func (r *reporter) run() {
	defer close(r.done)
	var client pluginv1.HostServiceClient
	var conn *grpc.ClientConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-r.ctx.Done():
			return
		case f := <-r.queue:
			if client == nil {
				c, cc, err := dialHost(r.addr, r.key)
				if err != nil {
					continue // no host to tell (HostAddrEnv is not usable)
				}
				client, conn = c, cc
			}
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(r.ctx, ReportMetadata, ReportRefused), reportTimeout)
			_, _ = client.Log(ctx, f.logRequest())
			cancel()
		}
	}
}

// close stops reporting; a report in flight is abandoned.
func (r *reporter) close() {
	r.stop()
	<-r.done
}

// logRequest is the report: HostService.Log with no invocation id, the
// method refused, why, and the caller's uid and pid as this provider saw
// them (a pid outside its pid namespace is 0, and left out).
func (f refusal) logRequest() *pluginv1.LogRequest {
	fields := map[string]string{"rpc": f.method, "reason": f.reason}
	if f.known {
		fields["caller_uid"] = strconv.Itoa(f.uid)
		if f.pid > 0 {
			fields["caller_pid"] = strconv.Itoa(f.pid)
		}
	}
	return &pluginv1.LogRequest{Level: "warn", ReasonCode: ReportRefused, Fields: fields}
}
