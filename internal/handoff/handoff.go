// Package handoff lets airlock host hand a sandboxed plugin's proxy
// listener to the airlock serve on the same machine, so that the plugin's
// requests reach the egress proxy with no relay hop, and so that the proxy
// knows which plugin every connection on that listener comes from. The
// listener lives in the plugin's network namespace (or is any TCP
// listener the host made for that plugin alone); only its descriptor
// crosses, over a unix socket beside the broker API's, with the broker
// token and the plugin's name.
//
// # Protocol
//
// The host connects and sends one message: a JSON object
// {"version": 2, "token": "…", "plugin": "…"} with the listener's
// descriptor attached (SCM_RIGHTS). It reads one line back, which starts
// with "airlock-handoff/2 " and then says "ok" or why not. The proxy then
// serves the listener for that plugin (a handle or pass of any other
// plugin is refused there) for as long as the connection stays open; the
// host closes it when the plugin exits, and the proxy closes the
// listener.
//
// The version is checked before anything else, on both sides, so that a
// host and a serve of different releases refuse each other with a
// message that says so, rather than serve a plugin's listener without
// knowing whose it is: a serve refuses version 1 (the bare token, which
// names no plugin) and any other version it does not speak; a host
// refuses an answer without the version prefix (a version-1 serve's).
// Either way the plugin does not start (internal/sandbox): relayed to the
// shared proxy port, its connections could not be told from another
// plugin's.
//
// A serve answers name_taken to a hand-over for a plugin name it already
// serves for another host process: the proxy knows a plugin by name, so
// two hosts sharing a serve must not share a name. Keep hands a listener
// over and over again across restarts of serve.
//
// # Security
//
// The socket is a peerauth socket (peer uid checked) and the token is the
// broker API's: whoever may hand over a listener may mint handles anyway,
// and names the plugin it hands over for. A plugin never sees either (the
// sandbox hides both).
package handoff

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// SocketName is the handoff socket's name beside the broker socket: no
// longer than the broker socket's default name, so that it fits wherever
// that does.
const SocketName = "handoff.sock"

// Path is the handoff socket beside the broker socket brokerSocket.
func Path(brokerSocket string) string {
	return filepath.Join(filepath.Dir(brokerSocket), SocketName)
}

const timeout = 10 * time.Second

// ErrRefused: serve refused the listener.
var ErrRefused = errors.New("airlock serve refused the plugin's proxy listener")

// Serve answers hand-overs on l until ctx ends: each listener passes to
// take with the name of the plugin it was handed over for, and take
// serves it until its context ends. Every goroutine Serve
// starts has ended when it returns.
func Serve(ctx context.Context, l net.Listener, token *peerauth.Token, take func(ctx context.Context, plugin string, l net.Listener) error, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	names := &owners{by: map[string]owner{}}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			log.Warn("proxy handoff: accept failed", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		wg.Go(func() { serveConn(ctx, c, token, names, take, log) })
	}
}

// owners are the hosts (by process) whose plugins' listeners are served,
// by plugin name. The proxy knows a plugin by its name alone, so two
// hosts sharing one serve must not both hand over a plugin of one name:
// the second is refused while the first is served, instead of the two
// using each other's handles.
type owners struct {
	mu sync.Mutex
	by map[string]owner
}

type owner struct{ pid, n int }

// claim records one hand-over of plugin by the host process pid; false
// when another process holds the name.
func (o *owners) claim(plugin string, pid int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.by[plugin]
	if ok && cur.pid != pid {
		return false
	}
	o.by[plugin] = owner{pid: pid, n: cur.n + 1}
	return true
}

func (o *owners) release(plugin string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := o.by[plugin]
	if cur.n <= 1 {
		delete(o.by, plugin)
		return
	}
	cur.n--
	o.by[plugin] = cur
}

func serveConn(ctx context.Context, c net.Conn, token *peerauth.Token, names *owners, take func(context.Context, string, net.Listener) error, log *slog.Logger) {
	defer c.Close()
	// A unix connection, as peerauth.ListenUnix hands it (or a bare one).
	uc, ok := c.(interface {
		ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)
	})
	if !ok {
		return
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	fds := rights(oob[:oobn])
	m, r := readMessage(buf[:n], token)
	if r == nil && len(fds) != 1 {
		r = &reply{code: codeDescriptor, detail: "one listener descriptor expected"}
	}
	_, pid, perr := peerauth.PeerCred(c)
	if r == nil && (perr != nil || !names.claim(m.Plugin, pid)) {
		r = &reply{code: codeNameTaken, detail: "another airlock host's plugin of this name is served by this airlock serve: " +
			"plugin names must be unique among the hosts that share one serve"}
	}
	released := r != nil // nothing claimed
	release := func() {
		if !released {
			released = true
			names.release(m.Plugin)
		}
	}
	defer release()
	if r != nil {
		closeAll(fds)
		log.Warn("proxy handoff refused", "code", r.code, "reason", r.detail, "peer", c.RemoteAddr().String())
		peerauth.Refused("proxy handoff", r.code)
		_, _ = io.WriteString(c, r.line())
		return
	}
	f := os.NewFile(uintptr(fds[0]), "plugin-proxy-listener")
	pl, err := net.FileListener(f)
	f.Close()
	if err != nil {
		_, _ = io.WriteString(c, (&reply{code: codeDescriptor, detail: "the descriptor is not a listening socket"}).line())
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = take(sctx, m.Plugin, pl)
	}()
	defer func() { cancel(); pl.Close(); <-done }()
	if _, err := io.WriteString(c, (&reply{code: codeOK}).line()); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	// Served until the host hangs up (the plugin exited) or ctx ends.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, _ = io.Copy(io.Discard, c)
	release() // the name is free before the listener's service ends
}

func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Give hands l, plugin's proxy listener, to the airlock serve listening
// on socket, presenting token. Serve's proxy serves l for plugin until the
// returned Closer is closed. On success l is closed here (serve holds its
// own descriptor); on error it is left open for the caller. A serve of
// another protocol version is refused with ErrVersion.
func Give(socket, token, plugin string, l net.Listener) (io.Closer, error) {
	c, err := give(socket, token, plugin, l)
	if err != nil {
		return nil, err
	}
	l.Close()
	return c, nil
}

// give is Give, leaving l open whatever happens.
func give(socket, token, plugin string, l net.Listener) (net.Conn, error) {
	tl, ok := l.(*net.TCPListener)
	if !ok {
		return nil, errors.New("only a TCP listener can be handed over")
	}
	msg, err := encodeMessage(message{Version: Version, Token: token, Plugin: plugin})
	if err != nil {
		return nil, err
	}
	f, err := tl.File()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := peerauth.CheckSocketDir("proxy handoff socket", socket); err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, fmt.Errorf("proxy handoff socket: %w", err)
	}
	uc := c.(*net.UnixConn)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, _, err := uc.WriteMsgUnix(msg, unix.UnixRights(int(f.Fd())), nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("proxy handoff: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, 512)).ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if err := parseReply(line); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
