package handoff

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// sendRaw sends msg with l's descriptor to socket, as a host of any
// version would, and returns serve's answer line.
func sendRaw(t *testing.T, socket string, msg []byte, l net.Listener) string {
	t.Helper()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.(*net.UnixConn).WriteMsgUnix(msg, unix.UnixRights(int(f.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// A host and a serve of different releases refuse each other, each with
// a message that says the versions differ and what to upgrade, and the
// host keeps its listener (its plugin is relayed instead).
func TestVersionMismatchRefused(t *testing.T) {
	socket, token, _ := startServe(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// A version-1 host sends the bare token: a version-1 serve would
	// have served the listener without knowing whose it is.
	line := sendRaw(t, socket, []byte(token), l)
	if !strings.HasPrefix(line, "airlock-handoff/2 version: ") || !strings.Contains(line, "sent version 1") ||
		!strings.Contains(line, "airlock host") || strings.Contains(line, token) {
		t.Fatalf("a version-1 host's hand-over answered %q", line)
	}
	// A later version is refused the same way, naming it.
	line = sendRaw(t, socket, []byte(`{"version":3,"token":"`+token+`","plugin":"p"}`), l)
	if !strings.HasPrefix(line, "airlock-handoff/2 version: ") || !strings.Contains(line, "sent version 3") {
		t.Fatalf("a version-3 host's hand-over answered %q", line)
	}
	// Without the plugin's name the listener could not be served for it.
	line = sendRaw(t, socket, []byte(`{"version":2,"token":"`+token+`"}`), l)
	if !strings.HasPrefix(line, "airlock-handoff/2 malformed: ") || !strings.Contains(line, "plugin") {
		t.Fatalf("a hand-over naming no plugin answered %q", line)
	}
	stillListens(t, l)

	// A version-1 serve takes the whole message for a wrong token and
	// answers as version 1 did: the host says the versions differ.
	old := oldServe(t)
	_, err = Give(old, token, "example.tickets", l)
	if !errors.Is(err, ErrVersion) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "airlock serve") {
		t.Fatalf("Give to a version-1 serve: %v", err)
	}
	stillListens(t, l)
}

// oldServe answers one hand-over as a version-1 serve would answer a
// message that is not its token.
func oldServe(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), SocketName)
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf, oob := make([]byte, maxMessage), make([]byte, unix.CmsgSpace(4))
		if _, oobn, _, _, err := c.(*net.UnixConn).ReadMsgUnix(buf, oob); err == nil {
			closeAll(rights(oob[:oobn]))
		}
		_, _ = io.WriteString(c, "unauthenticated: present the token of broker.api.token_file\n")
	}()
	t.Cleanup(func() { l.Close(); <-done; os.Remove(socket) })
	return socket
}

// Give refuses to hand a listener over for no plugin, before it sends
// anything.
func TestGiveNeedsPlugin(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{"", "a\nb", strings.Repeat("p", maxPlugin+1), "\xff"} {
		if _, err := Give(filepath.Join(t.TempDir(), "none.sock"), "tok", p, l); err == nil || !strings.Contains(err.Error(), "plugin's name") {
			t.Errorf("Give for plugin %q: %v", p, err)
		}
	}
}

// FuzzReadMessage: serve accepts exactly the version-2 messages with the
// token and a plugin's name, whatever else the bytes hold, and reads
// back what Give sends; its answer never quotes the token.
func FuzzReadMessage(f *testing.F) {
	dir := f.TempDir()
	tok, err := peerauth.EnsureToken("broker.api.token_file", filepath.Join(dir, "broker.token"), peerauth.NoGroup)
	if err != nil {
		f.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "broker.token"))
	token := strings.TrimSpace(string(raw))
	f.Add([]byte(`{"version":2,"token":"`+token+`","plugin":"example.tickets"}`), "example.tickets")
	f.Add([]byte(`{"version":1}`), "p")
	f.Add([]byte("bare-token"), "p")
	f.Fuzz(func(t *testing.T, b []byte, plugin string) {
		m, r := readMessage(b, tok)
		if r == nil && (m.Version != Version || !tok.Match(m.Token) || !validPlugin(m.Plugin)) {
			t.Fatalf("accepted %q", b)
		}
		if r != nil && strings.Contains(r.line(), token) {
			t.Fatalf("the answer quotes the token: %q", r.line())
		}
		if r != nil && parseReply(r.line()) == nil {
			t.Fatalf("the refusal %q reads as ok", r.line())
		}
		msg, err := encodeMessage(message{Version: Version, Token: token, Plugin: plugin})
		if err != nil {
			if validPlugin(plugin) {
				t.Fatalf("plugin %q not sent: %v", plugin, err)
			}
			return
		}
		if m, r := readMessage(msg, tok); r != nil || m.Plugin != plugin {
			t.Fatalf("Give's message for %q read as %q, %v", plugin, m.Plugin, r)
		}
	})
}
