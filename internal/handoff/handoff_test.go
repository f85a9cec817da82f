package handoff

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
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
	tok, err := peerauth.EnsureToken("broker.api.token_file", tokFile, peerauth.NoGroup)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(tokFile)
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
	t.Cleanup(func() { cancel(); <-done })
	return socket, strings.TrimSpace(string(raw)), ended
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
