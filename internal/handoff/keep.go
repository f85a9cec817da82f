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
// hands l over again, retrying until serve is back or the Closer is
// closed. Meanwhile the plugin's connections wait in l's backlog. The
// first hand-over is made before Keep returns: its error is Give's, and l
// is then left open for the caller. Closing the Closer ends the
// hand-over and closes l.
func Keep(socket, token, plugin string, l net.Listener, log *slog.Logger) (io.Closer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := give(socket, token, plugin, l)
	if err != nil {
		return nil, err
	}
	k := &keeper{l: l, conn: c, stop: make(chan struct{}), done: make(chan struct{}), log: log.With("plugin", plugin)}
	go k.run(func() (net.Conn, error) { return give(socket, token, plugin, l) })
	return k, nil
}

// Retry bounds of Keep's hand-over after serve dropped it.
const (
	keepRetryFirst = 100 * time.Millisecond
	keepRetryMax   = 5 * time.Second
)

type keeper struct {
	l    net.Listener
	stop chan struct{}
	done chan struct{}
	log  *slog.Logger
	once sync.Once

	mu   sync.Mutex
	conn net.Conn // the hand-over in force; nil between two
}

func (k *keeper) run(give func() (net.Conn, error)) {
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
		k.log.Warn("airlock serve dropped the plugin's proxy listener (restarted?); handing it over again; the plugin's requests wait meanwhile")
		k.mu.Lock()
		k.conn = nil
		k.mu.Unlock()
		for wait := keepRetryFirst; ; wait = min(2*wait, keepRetryMax) {
			t := time.NewTimer(wait)
			select {
			case <-k.stop:
				t.Stop()
				return
			case <-t.C:
			}
			nc, err := give()
			if err != nil {
				continue
			}
			k.mu.Lock()
			select {
			case <-k.stop: // closed meanwhile
				k.mu.Unlock()
				nc.Close()
				return
			default:
			}
			k.conn = nc
			k.mu.Unlock()
			k.log.Info("the plugin's proxy listener is handed over again")
			break
		}
	}
}

// Close ends the hand-over and closes the listener.
func (k *keeper) Close() error {
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
