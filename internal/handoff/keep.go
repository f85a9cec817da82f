package handoff

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Keep is Give for a listener that must outlive a restart of airlock
// serve: the host keeps its own descriptor of l, so the port stays bound
// to the plugin (no other process can take it over while serve is away)
// and, when serve drops the hand-over (it restarted, or was killed),
// hands l over again, retrying until serve is back or the Kept is
// closed. Meanwhile the host answers the plugin's requests on l itself
// with 503 egress_unavailable (see Refuse), so that they fail at once
// instead of waiting in the backlog. The first hand-over is made before
// Keep returns: its error is Give's, and l is then left open for the
// caller. Closing the Kept ends the hand-over and closes l.
func Keep(socket, token, plugin string, l net.Listener, log *slog.Logger) (*Kept, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := give(socket, token, plugin, l)
	if err != nil {
		return nil, err
	}
	k := &Kept{l: l, conn: c, stop: make(chan struct{}), done: make(chan struct{}), log: log.With("plugin", plugin)}
	go k.run(func() (net.Conn, error) { return give(socket, token, plugin, l) })
	return k, nil
}

// Retry bounds of Keep's hand-over after serve dropped it.
const (
	keepRetryFirst = 100 * time.Millisecond
	keepRetryMax   = 5 * time.Second
)

// Kept is a listener Keep keeps handed over to serve.
type Kept struct {
	l    net.Listener
	stop chan struct{}
	done chan struct{}
	log  *slog.Logger
	once sync.Once

	mu   sync.Mutex
	conn net.Conn // the hand-over in force; nil between two
}

// Serving reports whether serve holds the listener now (false while the
// host refuses the plugin's requests in its place).
func (k *Kept) Serving() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.conn != nil
}

func (k *Kept) run(give func() (net.Conn, error)) {
	defer close(k.done)
	for {
		k.mu.Lock()
		c := k.conn
		k.mu.Unlock()
		_, _ = io.Copy(io.Discard, c) // until serve hangs up, or Close
		select {
		case <-k.stop:
			return
		default:
		}
		k.log.Warn("airlock serve dropped the plugin's proxy listener (restarted?); handing it over again; " +
			"the plugin's requests get 503 egress_unavailable meanwhile")
		k.mu.Lock()
		k.conn = nil
		k.mu.Unlock()
		if !k.handBack(give) {
			return
		}
		k.log.Info("the plugin's proxy listener is handed over again")
	}
}

// handBack refuses the plugin's requests until a hand-over succeeds
// (true) or the Kept is closed (false). The refusing stops before each
// attempt, so that serve and the host never accept on l at once.
func (k *Kept) handBack(give func() (net.Conn, error)) bool {
	for wait := keepRetryFirst; ; wait = min(2*wait, keepRetryMax) {
		r := Refuse(k.l)
		t := time.NewTimer(wait)
		select {
		case <-k.stop:
			t.Stop()
			r.Stop()
			return false
		case <-t.C:
		}
		r.Stop()
		nc, err := give()
		if err != nil {
			continue
		}
		k.mu.Lock()
		select {
		case <-k.stop: // closed meanwhile
			k.mu.Unlock()
			nc.Close()
			return false
		default:
		}
		k.conn = nc
		k.mu.Unlock()
		return true
	}
}

// Close ends the hand-over and closes the listener.
func (k *Kept) Close() error {
	k.once.Do(func() {
		k.mu.Lock()
		close(k.stop)
		if k.conn != nil {
			k.conn.Close()
		}
		k.mu.Unlock()
		<-k.done
		k.l.Close()
	})
	return nil
}
