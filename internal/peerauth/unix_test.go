//go:build linux

package peerauth

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestListenUnixRefusesOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(filepath.Join(dir, "b.sock"), UnixOptions{GID: NoGroup}); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("0755 directory: %v", err)
	}
}

func TestListenUnixRefusesLiveSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "b.sock")
	l, err := ListenUnix(sock, UnixOptions{GID: NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	done := acceptAll(l, func(net.Conn) {})
	if _, err := ListenUnix(sock, UnixOptions{GID: NoGroup}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	l.Close()
	<-done
	// A stale socket file (no listener) is replaced.
	l2, err := ListenUnix(sock, UnixOptions{GID: NoGroup})
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	l2.Close()
}

// A peer whose uid is not allowed is closed before a byte is read; an
// allowed one is served.
func TestListenUnixPeerUID(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []int
		served  bool
	}{{"own uid by default", nil, true}, {"uid not listed", []int{os.Getuid() + 4242}, false}} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "run", "s.sock")
			l, err := ListenUnix(sock, UnixOptions{AllowedUIDs: c.allowed, GID: NoGroup})
			if err != nil {
				t.Fatal(err)
			}
			done := acceptAll(l, func(conn net.Conn) { _, _ = conn.Write([]byte("hello")) })
			defer func() { l.Close(); <-done }()
			conn, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, _ := io.ReadAll(conn)
			if got := string(b) == "hello"; got != c.served {
				t.Fatalf("served = %v (%q), want %v", got, b, c.served)
			}
			st, err := os.Stat(sock)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("socket mode %v %v", st.Mode().Perm(), err)
			}
		})
	}
}

// With a shared group the directory is 0750 and the socket 0660, both of
// that group (the test uses a group this process is in).
func TestListenUnixSharedGroup(t *testing.T) {
	gid := os.Getgid()
	sock := filepath.Join(t.TempDir(), "run", "s.sock")
	l, err := ListenUnix(sock, UnixOptions{GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for p, want := range map[string]os.FileMode{filepath.Dir(sock): 0o750, sock: 0o660} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want || int(st.Sys().(*syscall.Stat_t).Gid) != gid {
			t.Fatalf("%s: mode %#o gid %d, want %#o gid %d", p, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
}

// acceptAll hands every connection l accepts to serve and closes it; the
// channel closes once l is closed.
func acceptAll(l net.Listener, serve func(net.Conn)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			serve(c)
			c.Close()
		}
	}()
	return done
}

// A connection ListenUnix accepts names its caller: RemoteAddr is the
// Peer (uid and pid as the kernel saw them at connect), so that a refusal
// after the accept — a wrong token — can be attributed.
func TestListenUnixConnNamesPeer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "s.sock")
	l, err := ListenUnix(sock, UnixOptions{GID: NoGroup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := Peer{UID: os.Getuid(), PID: os.Getpid()}
	got, ok := c.RemoteAddr().(Peer)
	if !ok || got != want {
		t.Fatalf("RemoteAddr = %v (peer %v), want %v", c.RemoteAddr(), ok, want)
	}
	if uid, pid, err := PeerCred(c); err != nil || uid != want.UID || pid != want.PID {
		t.Fatalf("PeerCred = %d %d %v", uid, pid, err)
	}
	if s := c.RemoteAddr().String(); s != fmt.Sprintf("uid=%d pid=%d", want.UID, want.PID) {
		t.Fatalf("RemoteAddr().String() = %q", s)
	}
}

// A socket that refuses a peer's uid says which users it admits, and
// Refusal reads it back; a socket that admits the caller says nothing.
func TestRefusalNamesAdmittedUsers(t *testing.T) {
	other := os.Getuid() + 4242
	for _, c := range []struct {
		name    string
		allowed []int
		want    []string
	}{
		{"refused", []int{other}, []string{fmt.Sprintf("the test socket admits uid %d", other), fmt.Sprintf("; this connection came from uid %d", os.Getuid())}},
		{"admitted", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "run", "s.sock")
			l, err := ListenUnix(sock, UnixOptions{Name: "test socket", AllowedUIDs: c.allowed, GID: NoGroup})
			if err != nil {
				t.Fatal(err)
			}
			done := acceptAll(l, func(net.Conn) {})
			defer func() { l.Close(); <-done }()
			got := Refusal(sock)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Fatalf("Refusal = %q, want %q in it", got, w)
				}
			}
			if c.want == nil && got != "" {
				t.Fatalf("Refusal = %q from a socket that admits the caller", got)
			}
		})
	}
}

// A client connects (and presents its token) only to a socket in a
// directory neither its group nor others may write: a shared group may
// enter (0750), not plant a stand-in (0770).
func TestCheckSocketDir(t *testing.T) {
	for mode, ok := range map[os.FileMode]bool{0o700: true, 0o750: true, 0o711: true, 0o770: false, 0o777: false, 0o703: false} {
		dir := t.TempDir()
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		err := CheckSocketDir("broker socket", filepath.Join(dir, "broker.sock"))
		if (err == nil) != ok {
			t.Errorf("mode %#o: %v", mode, err)
		}
	}
}
