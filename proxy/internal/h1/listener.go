package h1

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/internal/serve"
)

// Server is the HTTP/1.1 loop for one listener: it accepts clients,
// serves each connection on one goroutine, and tracks the connections
// for shutdown. Its exported fields are its seams to the rest of the
// proxy; set them before Serve and do not change them after.
type Server struct {
	Handler http.Handler // runs each request read
	Log     *slog.Logger
	// Refuse audits what the loop refused before any handler saw it
	// and returns the answer; ctx is the connection's. The connection
	// closes after the answer.
	Refuse func(ctx context.Context, r Refusal) *http.Response
	// ConnContext, when set, derives each connection's base context.
	ConnContext func(context.Context) context.Context

	ReadHeaderTimeout time.Duration // for a connection's first request head
	IdleTimeout       time.Duration // for each later one
	HeaderLimit       int64         // the largest request head, in bytes

	shutting atomic.Bool
	mu       sync.Mutex
	conns    map[*Conn]struct{}
	wg       sync.WaitGroup
}

// Serve accepts on l until ctx ends, then closes idle connections, lets
// requests in flight finish for up to serve.ShutdownGrace, and closes the
// rest.
func (cs *Server) Serve(ctx context.Context, l net.Listener) error {
	cs.conns = map[*Conn]struct{}{}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if cs.ConnContext != nil {
		base = cs.ConnContext(base)
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var err error
	var delay time.Duration
	for {
		var nc net.Conn
		nc, err = l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				err = nil
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAccept(err) {
				// Out of file descriptors and the like: back off as
				// net/http does rather than spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				cs.Log.Warn("proxy: accept failed; retrying", "error", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			break
		}
		delay = 0
		c := newConn(cs, nc, base)
		if !cs.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
	l.Close()
	cs.shutdown(ctx.Err() != nil, cancel)
	return err
}

func isTemporaryAccept(err error) bool {
	var se interface{ Temporary() bool }
	return errors.As(err, &se) && se.Temporary()
}

func (cs *Server) track(c *Conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.shutting.Load() {
		return false
	}
	cs.conns[c] = struct{}{}
	cs.wg.Add(1)
	return true
}

// SetIdle records that c waits for its next request; it reports false
// when the server is shutting down and c should close instead. shutdown
// sets shutting before it looks at each connection's idle flag, so either
// c sees shutting here or shutdown sees c idle and closes it.
func (c *Conn) SetIdle() bool {
	c.idleFlag().Store(true)
	return !c.cs.shutting.Load()
}

// idleFlag is where shutdown looks: a connection inside a CONNECT tunnel
// is idle or busy on its CONNECT's behalf, so an idle tunnel closes at
// once on shutdown as an idle connection does.
func (c *Conn) idleFlag() *atomic.Bool {
	if c.outer != nil {
		return &c.outer.idle
	}
	return &c.idle
}

func (cs *Server) untrack(c *Conn) {
	cs.mu.Lock()
	delete(cs.conns, c)
	cs.mu.Unlock()
	cs.wg.Done()
}

func (cs *Server) shutdown(graceful bool, cancel context.CancelFunc) {
	cs.mu.Lock()
	cs.shutting.Store(true)
	for c := range cs.conns {
		if c.idle.Load() {
			c.conn.Close()
		}
	}
	cs.mu.Unlock()
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	if graceful {
		select {
		case <-done:
			return
		case <-time.After(serve.ShutdownGrace):
		}
	}
	cancel()
	cs.mu.Lock()
	for c := range cs.conns {
		c.conn.Close()
	}
	cs.mu.Unlock()
	<-done
}
