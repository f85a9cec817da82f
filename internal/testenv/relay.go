//go:build linux

package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay forwards TCP connections to a target, and can hold what the
// target sends: a link that stays up but delivers nothing (a replica
// cut off from its primary while the primary still counts it connected).
type Relay struct {
	Addr string // 127.0.0.1:PORT to dial instead of the target

	mu   sync.Mutex
	held bool
	gate chan struct{} // closed while not held
	cut  bool          // refusing: every connection is closed at once
	cutf func()        // closes the open connections
}

// NewRelay listens on loopback and forwards every connection to target
// until the test ends.
func NewRelay(tb testing.TB, target string) *Relay {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("relay listener: %v", err)
	}
	r := &Relay{Addr: l.Addr().String(), gate: make(chan struct{})}
	close(r.gate)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	r.cutf = func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
	}
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		r.Release()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			cut := r.cut
			r.mu.Unlock()
			if cut {
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			track(in)
			track(out)
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); r.copyHeld(in, out); in.Close() }()
		}
	}()
	return r
}

// copyHeld copies from the target, waiting while the relay is held.
func (r *Relay) copyHeld(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			gate := r.gate
			r.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Hold stops delivering what the target sends (it is kept, not lost,
// until Release); the connections stay open.
func (r *Relay) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		r.held, r.gate = true, make(chan struct{})
	}
}

// Release delivers again, starting with what was held.
func (r *Relay) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		r.held = false
		close(r.gate)
	}
}

// Cut closes every connection and refuses new ones until Restore: the
// target is down for whoever dials the relay, and keeps its data.
func (r *Relay) Cut() {
	r.mu.Lock()
	r.cut = true
	r.mu.Unlock()
	r.cutf()
}

// Restore accepts connections again after Cut.
func (r *Relay) Restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}
