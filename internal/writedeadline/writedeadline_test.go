package writedeadline_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
	"github.com/airlock-dev/airlock/internal/writedeadline"
)

// The write deadline bounds each write only: a stream that was written
// to, then stayed idle for longer than the timeout, still ends cleanly
// (the server's own last write is not refused by a deadline left
// behind) and its connection serves the next request.
func TestWriteDeadlineCleared(t *testing.T) {
	const d = 50 * time.Millisecond
	srv := httptest.NewServer(writedeadline.Handler(d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("a"))
		_ = http.NewResponseController(w).Flush()
		if r.URL.Path == "/idle" {
			time.Sleep(3 * d) // a stream with nothing to send for longer than the timeout
		}
	})))
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	for i, path := range []string{"/idle", "/"} {
		reused := false
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "a" {
			t.Fatalf("%s: body %q, %v", path, body, err)
		}
		if i == 1 && !reused {
			t.Fatalf("%s: the idle stream's connection was not kept", path)
		}
	}
}

// armedWriter records how many bytes each armed deadline covered.
type armedWriter struct {
	http.ResponseWriter
	armed bool
	spans []int // bytes written under each deadline
}

func (w *armedWriter) SetWriteDeadline(t time.Time) error {
	w.armed = !t.IsZero()
	if w.armed {
		w.spans = append(w.spans, 0)
	}
	return nil
}

func (w *armedWriter) Write(b []byte) (int, error) {
	if !w.armed {
		panic("a write with no deadline")
	}
	w.spans[len(w.spans)-1] += len(b)
	return len(b), nil
}

// A large write (an invocation's outcome of many megabytes) is bounded
// piece by piece, not as a whole: a caller that reads steadily, if
// slowly, is not cut off because the whole outcome took longer than the
// timeout, while one that stops reading still fails the piece that finds
// the buffers full.
func TestLargeWriteBoundedInPieces(t *testing.T) {
	aw := &armedWriter{ResponseWriter: httptest.NewRecorder()}
	w := writedeadline.Wrap(aw, time.Second)
	big := make([]byte, 10<<20+1)
	if n, err := w.Write(big); n != len(big) || err != nil {
		t.Fatalf("wrote %d, %v", n, err)
	}
	total := 0
	for _, n := range aw.spans {
		if n > writedeadline.Piece {
			t.Fatalf("%d bytes under one deadline, want at most %d", n, writedeadline.Piece)
		}
		total += n
	}
	if total != len(big) || aw.armed {
		t.Fatalf("%d bytes written, deadline left armed: %v", total, aw.armed)
	}
}

// End to end: a client that reads a large answer steadily, but more
// slowly than the answer as a whole fits in the timeout, gets all of it.
func TestSlowSteadyReaderKeepsLargeAnswer(t *testing.T) {
	const d = time.Second
	big := bytes.Repeat([]byte("x"), 1<<20)
	wrote := make(chan error, 1)
	srv := httptest.NewUnstartedServer(writedeadline.Handler(d, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, err := w.Write(big) // one write, as json.Encoder makes of an outcome
		wrote <- err
	})))
	// Buffers far smaller than the answer, not so small that the
	// connection itself is slow.
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			_ = c.(*net.TCPConn).SetWriteBuffer(16 << 10)
		}
	}
	srv.Start()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// 32 KiB every 100ms: a piece (64 KiB) in about 200ms, well within
	// the timeout; the whole answer in about 3s, well beyond it.
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, buf := 0, make([]byte, 32<<10)
	for {
		n, err := io.ReadFull(resp.Body, buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := <-wrote; err != nil || got != len(big) {
		t.Fatalf("read %d of %d bytes; the write: %v", got, len(big), err)
	}
}

// A client that pipelines requests and never reads the answers does not
// hold the server: net/http writes a small answer only after the handler
// returns, and that write, which finds the buffers full, fails at the
// deadline too; the connection's goroutine ends while the client still
// holds the connection.
func TestUnreadAnswersAfterHandler(t *testing.T) {
	body := bytes.Repeat([]byte("a"), 3000) // less than net/http's buffer: written after the handler
	srv := testenv.StartSmallBuffers(t, writedeadline.Handler(200*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body)
	})))
	leaks := testenv.CheckGoroutines(t)
	testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(), strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 100))
	leaks()
}

// deadlines records the write deadlines set on it, and at each write
// the one in force.
type deadlines struct {
	http.ResponseWriter
	now, atWrite time.Time
}

func (w *deadlines) SetWriteDeadline(t time.Time) error { w.now = t; return nil }

func (w *deadlines) Write(b []byte) (int, error) { w.atWrite = w.now; return len(b), nil }

// A Handler inside another (the control API's inside the listener's)
// bounds its writes with its own timeout, and the limit its handler sets
// holds: the outer one does not arm its own deadline over it.
func TestNestedHandlerKeepsLimit(t *testing.T) {
	limit := time.Now().Add(time.Minute)
	inner := writedeadline.Handler(time.Hour, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !writedeadline.SetLimit(w, limit) {
			t.Fatal("the inner handler's writer takes no limit")
		}
		_, _ = w.Write([]byte("a"))
	}))
	outer := writedeadline.Handler(time.Second, inner)
	rec := &deadlines{ResponseWriter: httptest.NewRecorder()}
	outer.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if !rec.atWrite.Equal(limit) {
		t.Fatalf("the write's deadline %v, want the limit %v", rec.atWrite, limit)
	}
}
