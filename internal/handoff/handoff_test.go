package handoff

import (
	"context"
	"errors"
	"io"
	"net"
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
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
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
	if got := served(); got != "served to example.tickets" {
		t.Fatalf("after the restart: %q", got)
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
