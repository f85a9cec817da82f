package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// node is what every running entry point is: a context its goroutines
// end with, the goroutines, and the closers that run (last added first)
// once they have ended. A listener's failure stops the node and is its
// error.
type node struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func()

	stopOnce sync.Once
	mu       sync.Mutex
	err      error
}

func newNode(ctx context.Context) *node {
	ctx, cancel := context.WithCancel(ctx)
	return &node{ctx: ctx, cancel: cancel}
}

// goRun runs f on its own goroutine until the node stops.
func (n *node) goRun(f func(context.Context)) {
	n.wg.Add(1)
	go func() { defer n.wg.Done(); f(n.ctx) }()
}

// serve runs a listener's loop; when it ends the node stops, and a
// failure (not a shutdown) is recorded as the node's error.
func (n *node) serve(what string, f func(context.Context) error) {
	n.goRun(func(ctx context.Context) { n.fail(what, f(ctx)) })
}

func (n *node) fail(what string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
		n.mu.Lock()
		if n.err == nil {
			n.err = fmt.Errorf("%s: %w", what, err)
		}
		n.mu.Unlock()
	}
	n.cancel()
}

// wait blocks until the node's context ends, then stops it.
func (n *node) wait() error {
	<-n.ctx.Done()
	return n.stop()
}

// stop ends the goroutines, runs the closers, and returns the first
// failure of a listener. Calling it again returns the same.
func (n *node) stop() error {
	n.stopOnce.Do(func() {
		n.cancel()
		n.wg.Wait()
		for i := len(n.closers) - 1; i >= 0; i-- {
			n.closers[i]()
		}
	})
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}
