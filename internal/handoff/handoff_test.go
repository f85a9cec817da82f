package handoff

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// startServe runs Serve on a fresh socket whose take answers every
// connection "served to <plugin>" and reports each listener's end.
func startServe(t *testing.T) (socket, token string, ended chan struct{}) {
	dir := t.TempDir()
	socket = filepath.Join(dir, "run", SocketName)
	tokFile := filepath.Join(dir, "broker.token")
	if _, err := peerauth.EnsureToken("broker.api.token_file", tokFile, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(tokFile)
	ended, stop := startServeAt(t, socket, tokFile)
	t.Cleanup(stop)
	return socket, strings.TrimSpace(string(raw)), ended
}

// startServeAt runs Serve on socket with the token in tokFile until stop
// (a serve that can be stopped and started again: a restart).
func startServeAt(t *testing.T, socket, tokFile string) (ended chan struct{}, stop func()) {
	tok, err := peerauth.LoadToken("broker.api.token_file", tokFile, peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	l, err := peerauth.ListenUnix(socket, peerauth.UnixOptions{GID: peerauth.NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	ended = make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Serve(ctx, l, tok, func(ctx context.Context, plugin string, pl net.Listener) error {
			defer func() { ended <- struct{}{} }()
			stop := context.AfterFunc(ctx, func() { pl.Close() })
			defer stop()
			for {
				c, err := pl.Accept()
				if err != nil {
					return err
				}
				_, _ = io.WriteString(c, "served to "+plugin)
				c.Close()
			}
		}, nil)
		close(done)
	}()
	var once sync.Once
	return ended, func() { once.Do(func() { cancel(); <-done }) }
}

// A listener handed over with the token is served by the other side,
// for the plugin named, until the host hangs up; then it is closed there.
func TestGive(t *testing.T) {
	socket, token, ended := startServe(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	closer, err := Give(socket, token, "example.tickets", l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "served to example.tickets" {
		t.Fatalf("got %q", b)
	}
	closer.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener was not released after the host hung up")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after the hand-over ended")
	}
}

// Without the token (a bit flipped) nothing is served and the caller
// keeps its listener.
func TestGiveRefusedWithoutToken(t *testing.T) {
	socket, token, _ := startServe(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bad := []byte(token)
	bad[0] ^= 1
	_, err = Give(socket, string(bad), "example.tickets", l)
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrVersion) || strings.Contains(err.Error(), string(bad)) {
		t.Fatalf("bad token: %v", err)
	}
	stillListens(t, l)
}

// stillListens fails t unless l still accepts: a refused hand-over leaves
// the listener with the caller, which relays it.
func stillListens(t *testing.T, l net.Listener) {
	t.Helper()
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("the refused caller lost its listener: %v", err)
	}
	c.Close()
}

// A kept listener survives a restart of serve: while serve is away the
// port stays bound (no other process can take it over), and once serve
// is back the listener is handed over again and served, for the same
// plugin.
func TestKeepAcrossServeRestart(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "run", SocketName)
	tokFile := filepath.Join(dir, "broker.token")
	if _, err := peerauth.EnsureToken("broker.api.token_file", tokFile, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(tokFile)
	_, stop := startServeAt(t, socket, tokFile)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	k, err := Keep(socket, strings.TrimSpace(string(raw)), "example.tickets", l, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = io.WriteString(c, "GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := served(); got != "served to example.tickets" {
		t.Fatalf("before the restart: %q", got)
	}
	stop() // serve goes away
	if other, err := net.Listen("tcp", addr); err == nil {
		other.Close()
		t.Fatal("while serve was away another process could bind the plugin's port")
	}
	ended2, stop2 := startServeAt(t, socket, tokFile) // and comes back
	defer stop2()
	// Until the host has handed the listener over again, the plugin's
	// requests are refused at once (TestKeepRefusesInTheGap).
	for got := served(); got != "served to example.tickets"; got = served() {
		if !strings.Contains(got, ErrorEgressUnavailable) {
			t.Fatalf("after the restart: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.Close()
	select {
	case <-ended2:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not release the listener after Close")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the port still accepts after Close")
	}
}

// While serve is away, a plugin's request on the kept listener — plain
// HTTP or CONNECT — is answered at once with 503 egress_unavailable,
// never left waiting in the backlog; Serving says so.
func TestKeepRefusesInTheGap(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "run", SocketName)
	tokFile := filepath.Join(dir, "broker.token")
	if _, err := peerauth.EnsureToken("broker.api.token_file", tokFile, peerauth.NoGroup); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(tokFile)
	ended, stop := startServeAt(t, socket, tokFile)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k, err := Keep(socket, strings.TrimSpace(string(raw)), "example.tickets", l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if !k.Serving() {
		t.Fatal("not serving after the hand-over")
	}
	stop()
	<-ended
	for k.Serving() {
		time.Sleep(10 * time.Millisecond)
	}
	for _, req := range []string{
		"GET http://api.example.com/v1/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
		"POST http://api.example.com/v1/x HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 5\r\n\r\nhello",
	} {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Generous: a refusal comes at once; the old code left the
		// request in the backlog until this deadline.
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Airlock-Error") != ErrorEgressUnavailable ||
			!strings.Contains(string(body), `"error":"egress_unavailable"`) {
			t.Fatalf("%q: %d %v %s", req, resp.StatusCode, resp.Header, body)
		}
	}
}

// A handoff socket in a directory others may write to could be another
// user's stand-in: the token and the listener are not sent there.
func TestGiveRefusesASocketOthersCouldPlant(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, SocketName)
	impostor, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Give(socket, "a-token-the-impostor-must-not-get-0123456789", "example.tickets", l); err == nil || !strings.Contains(err.Error(), "not connecting") {
		t.Fatalf("handed to a socket in a directory anyone may write to: %v", err)
	}
	// Nothing connected: the first connection the impostor accepts is a
	// probe made after the refusal.
	probe, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if _, err := io.WriteString(probe, "probe\n"); err != nil {
		t.Fatal(err)
	}
	c, err := impostor.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if line, err := bufio.NewReader(c).ReadString('\n'); line != "probe\n" {
		t.Fatalf("the impostor got a connection before the probe: %q %v", line, err)
	}
	stillListens(t, l)
}
