package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http/httpguts"

	"github.com/airlock-dev/airlock/proxy/internal/h1"
)

// WebSocket through the proxy. The upgrade request is an ordinary
// request to prepare: handle, destination (the path and GET), limits,
// injection and the handle-left check, as absolute-form (ws:// is
// re-originated as wss://) or inside an intercepted tunnel (wss://).
// The proxy then opens the upstream WebSocket itself over TLS with the
// injected headers, and only once the upstream has accepted does it
// accept the plugin's, with the subprotocol the upstream chose. After
// that it relays message by message (github.com/coder/websocket
// reassembles frames): each message either way is bounded by
// limits.max_websocket_message, an upstream→plugin message passes the
// echo guard whole (so a secret split across frames is caught, and one
// split across messages has its later part masked), and the socket
// closes after limits.websocket_idle_timeout without a message. The
// socket holds its per-plugin concurrency slot while it is open; its
// handle (and the tunnel's CONNECT credential) are resolved again every
// stream check, and a revoked or expired one closes both sides with
// 1008 (policy violation). Audit: the handshake's line (status 101),
// and a websocket_closed line with message and byte counts each way.
// Pings are answered by the proxy on each side; compression is not
// negotiated.

// isWebSocketUpgrade reports whether r asks to switch to WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "websocket")
}

// newWebSocketTransport opens upstream WebSockets: HTTP/1.1 only, the
// SSRF-safe dialer, TLS verified as for every upstream. Nothing is
// pooled: an accepted socket is its own connection, and the connection
// of a refused handshake is closed with it rather than kept for the next
// handshake, which may be another plugin's.
func newWebSocketTransport(c Config, d *dialer, tlsConfig *tls.Config) *http.Transport {
	tc := tlsConfig.Clone()
	tc.NextProtos = []string{"http/1.1"}
	return &http.Transport{
		Proxy: nil, DialContext: d.dialClassed, TLSClientConfig: tc,
		TLSHandshakeTimeout: c.Upstream.TLSHandshakeTimeout, ResponseHeaderTimeout: c.Upstream.ResponseTimeout,
		DisableCompression: true, DisableKeepAlives: true,
	}
}

// wsHandshakeHeaders are set by the WebSocket library on each side.
var wsHandshakeHeaders = []string{"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions",
	"Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Host"}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	a := requestRecord(r)
	c := h1.ConnOf(w)
	if c == nil || r.Method != http.MethodGet {
		s.answer(w, r, a, deny(CodeUpgradeNotSupported, "a WebSocket handshake is a GET on an HTTP/1.1 connection"))
		return
	}
	if !wsHandshakeValid(r.Header) {
		// Checked before the upstream is dialled, which Accept would
		// only notice after.
		s.answer(w, r, a, deny(CodeBadRequest, "the WebSocket handshake needs Sec-WebSocket-Version 13 and a 16-byte Sec-WebSocket-Key"))
		return
	}
	// Accept checks the plugin's handshake as it came; prepare strips
	// Connection and Upgrade from r.
	accept := r.Clone(r.Context())
	x := s.prepareOrAnswer(w, r, a)
	if x == nil {
		return
	}
	hdr := r.Header.Clone()
	for _, k := range wsHandshakeHeaders {
		delete(hdr, k)
	}
	t0 := time.Now()
	// The transport dials classed connections (newWebSocketTransport):
	// the class of the address the handshake went to, or of the one the
	// dialer refused, is on the handshake's audit line and metric.
	var class addrClass
	dctx := httptrace.WithClientTrace(a.tr.dialContext(r.Context()), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { class = classOf(info.Conn) }})
	up, resp, err := websocket.Dial(dctx, "wss://"+r.URL.Host+requestTarget(r.URL), &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: s.ws, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		HTTPHeader: hdr, Subprotocols: splitTokens(accept.Header.Values("Sec-Websocket-Protocol")),
		CompressionMode: websocket.CompressionDisabled,
	})
	a.UpstreamMS = float64(time.Since(t0).Microseconds()) / 1000
	a.tr.done(spanExchange, t0, err)
	a.AddrClass = class
	if err != nil {
		if class == addrUnknown {
			a.AddrClass = refusedClass(err)
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			// The upstream answered without switching: its answer
			// goes back, through the guard like any response.
			s.forwardRefusedUpgrade(w, r, x, resp)
			return
		}
		d := upstreamDenial(err)
		x.done(d)
		d.write(w, r)
		return
	}
	up.SetReadLimit(s.cfg.Limits.MaxWebSocketMessage)
	aw := &wsAcceptWriter{rw: w, c: c, header: http.Header{}}
	pc, err := websocket.Accept(aw, accept, &websocket.AcceptOptions{
		Subprotocols: nonEmpty(up.Subprotocol()), InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		up.Close(websocket.StatusGoingAway, "") //nolint:errcheck // the plugin's handshake failed
		x.done(deny(CodeBadRequest, "the WebSocket handshake is malformed").withReason("accept: " + err.Error()))
		return
	}
	pc.SetReadLimit(s.cfg.Limits.MaxWebSocketMessage)
	a.Status = http.StatusSwitchingProtocols
	s.finish(a, nil)
	var tunnelCred string
	if t, ok := r.Context().Value(tunnelKey{}).(*tunnel); ok {
		tunnelCred = t.cred
	}
	ctx, stop := s.watchCredentials(r.Context(), x.handle, tunnelCred)
	defer stop()
	// A handle in a message is a violation like one in a request: it is
	// in the ledger before either side sees the socket close.
	st := s.relayWebSocket(ctx, pc, up, x.forms, a.tr, func() {
		s.violation(x.grant, violationKinds[CodeHandleInRequest], a.presentedBy)
	})
	x.release()
	// The messages' bytes as relayed, both ways, are in the ledger before
	// the closing audit line is written.
	s.chargeBytes(x.grant, st.bytesUp.Load()+st.bytesDown.Load())
	s.auditWebSocketClose(a, st)
}

// wsHandshakeValid checks the client's handshake fields RFC 6455 §4.1
// requires, as the WebSocket library's Accept will.
func wsHandshakeValid(h http.Header) bool {
	key, err := base64.StdEncoding.DecodeString(h.Get("Sec-Websocket-Key"))
	return h.Get("Sec-Websocket-Version") == "13" && err == nil && len(key) == 16
}

// splitTokens splits comma-separated header values into tokens.
func splitTokens(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// wsRefusedBodyCap is how much of a refused handshake's body the
// WebSocket library keeps.
const wsRefusedBodyCap = 1024

// forwardRefusedUpgrade sends the upstream's non-101 answer to the
// handshake back to the plugin, with the echo guard on its head and
// body (the WebSocket library keeps at most 1 KiB of it); one
// compressed anyway is refused, as exchange.RoundTrip refuses it.
func (s *Server) forwardRefusedUpgrade(w http.ResponseWriter, r *http.Request, x *exchange, resp *http.Response) {
	stripHopByHop(resp.Header)
	var forms *echoForms
	if s.echo {
		if d := unscannableEncoding(resp.Header); d != nil {
			resp.Body.Close()
			x.done(d)
			d.write(w, r)
			return
		}
		forms = x.forms
		x.audit.Redactions += redactHeaders(resp.Header, forms)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if forms != nil {
		x.audit.Redactions += redactInPlace(body, forms.pats)
		if len(body) >= wsRefusedBodyCap {
			// The body was cut: a secret straddling the cut would pass
			// as an unmatched prefix, so the last bytes that could
			// begin one are dropped, whatever they are (dropping only
			// a tail that matched would tell a plugin whose guess the
			// upstream reflects whether it began the secret).
			body = body[:max(0, len(body)-forms.keep)]
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	delete(w.Header(), "Content-Length")
	x.audit.Status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	x.audit.BytesOut = int64(len(body))
	x.done(nil)
}

// wsStats is what a relayed WebSocket carried.
type wsStats struct {
	msgsUp, msgsDown   atomic.Int64 // plugin→upstream, upstream→plugin
	bytesUp, bytesDown atomic.Int64
	redactions         atomic.Int64
	closeCode          websocket.StatusCode
	closedBy           string // plugin, upstream, revoked, idle, limit, shutdown
	opened             time.Time
}

var errWSIdle = errors.New("no WebSocket message for websocket_idle_timeout")

// relayWebSocket relays messages between the plugin's socket pc and the
// upstream's up until either closes, the credentials go, or it idles.
// handleSent runs when the plugin sent a handle in a message, before
// either side is closed.
func (s *Server) relayWebSocket(ctx context.Context, pc, up *websocket.Conn, forms *echoForms, tr *reqTrace, handleSent func()) *wsStats {
	st := &wsStats{opened: time.Now()}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := s.cfg.Limits.WebSocketIdleTimeout
	timer := time.AfterFunc(idle, func() { cancel(errWSIdle) })
	defer timer.Stop()
	var guard *messageGuard
	if s.echo && forms != nil {
		guard = &messageGuard{forms: forms}
	}
	type end struct {
		from string
		err  error
	}
	ends := make(chan end, 2)
	// The pumps' reads and writes must not see ctx end: the library
	// drops the connection without a close frame when they do. ctx
	// ending closes both sides below instead, with a status.
	ioCtx := context.WithoutCancel(ctx)
	pump := func(from, to *websocket.Conn, g *messageGuard, msgs, bytes *atomic.Int64, name string) {
		for {
			typ, data, err := from.Read(ioCtx)
			if err != nil {
				ends <- end{name, err}
				return
			}
			// The event is the message's read: recorded once relayed,
			// after the other side may have answered it.
			at := tr.now()
			timer.Reset(idle)
			if from == pc && bytesHoldHandle(data) {
				// A handle is never sent on (bodyscan.go): the message
				// is dropped and the socket closed.
				ends <- end{name, errHandleInBody}
				return
			}
			if g != nil {
				st.redactions.Add(int64(g.redact(data)))
			}
			if err := to.Write(ioCtx, typ, data); err != nil {
				ends <- end{name, err}
				return
			}
			msgs.Add(1)
			bytes.Add(int64(len(data)))
			tr.messageAt(at, from == up, false, int64(len(data)))
		}
	}
	go pump(pc, up, nil, &st.msgsUp, &st.bytesUp, "plugin")
	go pump(up, pc, guard, &st.msgsDown, &st.bytesDown, "upstream")
	var first end
	pending := 2
	select {
	case first = <-ends:
		pending--
	case <-ctx.Done():
	}
	code, reason := websocket.StatusGoingAway, ""
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCredentialGone):
		code, reason, st.closedBy = websocket.StatusPolicyViolation, "airlock "+CodeHandleInvalid, "revoked"
	case errors.Is(first.err, errHandleInBody):
		code, reason, st.closedBy = websocket.StatusPolicyViolation, "airlock "+CodeHandleInRequest, "handle_in_request"
	case errors.Is(cause, errWSIdle):
		code, reason, st.closedBy = websocket.StatusGoingAway, "airlock idle timeout", "idle"
	case first.err == nil:
		st.closedBy = "shutdown"
	case websocket.CloseStatus(first.err) != -1:
		// A close from one side goes on to the other.
		code, st.closedBy = websocket.CloseStatus(first.err), first.from
		var ce websocket.CloseError
		if errors.As(first.err, &ce) {
			reason = ce.Reason
		}
		if first.from == "upstream" && guard != nil {
			// The reason is upstream bytes like a message (an echo of
			// the secret fits in its 123 bytes); the upstream pump has
			// ended, so the guard is this goroutine's.
			b := []byte(reason)
			st.redactions.Add(int64(guard.redact(b)))
			reason = string(b)
		}
	case errors.Is(first.err, websocket.ErrMessageTooBig) || strings.Contains(first.err.Error(), "read limited"):
		code, reason, st.closedBy = websocket.StatusMessageTooBig, "airlock message too large", "limit"
	default:
		st.closedBy = first.from
	}
	st.closeCode = code
	if st.closedBy == "handle_in_request" {
		handleSent()
	}
	cancel(nil)
	// Close both with the chosen status; each waits (bounded by the
	// library) for its peer's close.
	var wg sync.WaitGroup
	for _, c := range []*websocket.Conn{pc, up} {
		wg.Go(func() {
			if c.Close(code, reason) != nil {
				_ = c.CloseNow()
			}
		})
	}
	wg.Wait()
	for ; pending > 0; pending-- {
		<-ends
	}
	return st
}

// auditWebSocketClose writes the socket's closing audit line (and its
// span).
func (s *Server) auditWebSocketClose(a *auditRecord, st *wsStats) {
	if s.tracer != nil {
		s.traceWebSocket(a, st, time.Now())
	}
	s.audit.LogAttrs(context.Background(), slog.LevelInfo, "websocket_closed",
		slog.String("plugin", a.Plugin), slog.String("invocation", a.Invocation), slog.String("intent", a.Intent),
		slog.String("handle_fp", a.HandleFP), slog.String("mode", a.Mode), slog.String("host", a.Host), slog.Int("port", a.Port),
		slog.String("path", a.Path), slog.String("closed_by", st.closedBy), slog.Int("close_code", int(st.closeCode)),
		slog.Int64("messages_up", st.msgsUp.Load()), slog.Int64("bytes_up", st.bytesUp.Load()),
		slog.Int64("messages_down", st.msgsDown.Load()), slog.Int64("bytes_down", st.bytesDown.Load()),
		slog.Int64("echo_redactions", st.redactions.Load()),
		slog.Float64("open_ms", float64(time.Since(st.opened).Microseconds())/1000))
}

// wsAcceptWriter is the ResponseWriter websocket.Accept writes the
// plugin's 101 to: the client loop's writer sends no interim status, so
// the 101 head is written here when Accept takes the connection.
type wsAcceptWriter struct {
	rw     http.ResponseWriter // the loop's
	c      *h1.Conn
	header http.Header
	status int
}

var _ http.Hijacker = (*wsAcceptWriter)(nil)

func (w *wsAcceptWriter) Header() http.Header { return w.header }

func (w *wsAcceptWriter) WriteHeader(code int) {
	w.status = code
	if code != http.StatusSwitchingProtocols {
		for k, v := range w.header {
			w.rw.Header()[k] = v
		}
		w.rw.WriteHeader(code)
	}
}

func (w *wsAcceptWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.rw.Write(p)
}

// Hijack writes the 101 head and hands the connection over; the hangup
// watch stops first, so that nothing else reads from it.
func (w *wsAcceptWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status != http.StatusSwitchingProtocols {
		return nil, nil, errors.New("hijack before the 101 head")
	}
	conn, brw := w.c.Hijack()
	b := append([]byte(nil), "HTTP/1.1 101 Switching Protocols\r\n"...)
	for k, vv := range w.header {
		for _, v := range vv {
			b = h1.AppendHeader(b, k, v)
		}
	}
	b = append(b, "\r\n"...)
	if _, err := brw.Write(b); err != nil {
		return nil, nil, err
	}
	if err := brw.Flush(); err != nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, brw, nil
}
