package handoff

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrorEgressUnavailable is the code (X-Airlock-Error, and "error" in the
// JSON body) of a plugin's request made while no airlock serve holds its
// proxy listener: serve is restarting or down.
const ErrorEgressUnavailable = "egress_unavailable"

// refusal is the whole answer: the proxy's error shape (a JSON body and
// X-Airlock-Error), and Connection: close. A CONNECT gets it too: the
// tunnel fails with 503 rather than never opening.
var refusal = func() []byte {
	body := `{"error":"` + ErrorEgressUnavailable + `","detail":"the egress proxy (airlock serve) is not running; ` +
		`the request was not sent; retry once it is back"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"X-Airlock-Error: " + ErrorEgressUnavailable + "\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// refuseReadTimeout bounds how long a refused connection may take to
// send its request head.
var refuseReadTimeout = 5 * time.Second // a var: the bound test holds connections past it

// maxRefusing bounds the connections one listener answers at a time: a
// plugin that opens many and sends nothing holds a host descriptor each
// for refuseReadTimeout; past the bound a connection is closed at once
// (the plugin still sees its request fail, as a reset).
const maxRefusing = 64

// Refusing is an accept loop that answers every connection on a listener
// with 503 egress_unavailable; Stop ends it.
type Refusing struct {
	l    deadlineListener
	done chan struct{}
	conn sync.WaitGroup
	busy atomic.Int32 // connections being answered (maxRefusing)
}

type deadlineListener interface {
	net.Listener
	SetDeadline(time.Time) error
}

// Refuse answers every connection on l with 503 egress_unavailable until
// Stop, reading the request head first (so a client that writes its
// request before reading gets the answer, not a reset). A listener that
// cannot be interrupted (no SetDeadline) is left alone: its connections
// wait in the backlog as before.
func Refuse(l net.Listener) *Refusing {
	dl, ok := l.(deadlineListener)
	r := &Refusing{l: dl, done: make(chan struct{})}
	if !ok {
		close(r.done)
		return r
	}
	_ = dl.SetDeadline(time.Time{})
	go r.loop()
	return r
}

func (r *Refusing) loop() {
	defer close(r.done)
	for {
		c, err := r.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and friends: do not spin
			continue
		}
		if r.busy.Add(1) > maxRefusing {
			r.busy.Add(-1)
			c.Close()
			continue
		}
		r.conn.Add(1)
		go func() {
			defer r.conn.Done()
			defer r.busy.Add(-1)
			refuse(c)
		}()
	}
}

func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseReadTimeout))
	if _, err := http.ReadRequest(bufio.NewReaderSize(c, 4096)); err != nil {
		return
	}
	if _, err := c.Write(refusal); err != nil {
		return
	}
	// Half-close and drain what the client still sends (a request body):
	// closing with unread bytes would reset the connection under the
	// answer.
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// Stop ends the accept loop and waits for the connections it answers;
// the listener stays open, its deadline cleared.
func (r *Refusing) Stop() {
	if r.l == nil {
		return
	}
	_ = r.l.SetDeadline(time.Now())
	<-r.done
	r.conn.Wait()
	_ = r.l.SetDeadline(time.Time{})
}
