//go:build linux

package peerauth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// UnixOptions say who may connect to a socket ListenUnix opens.
type UnixOptions struct {
	// Name is what messages call the socket ("broker socket").
	Name string
	// AllowedUIDs may connect (checked with SO_PEERCRED); default: the
	// uid this process runs as.
	AllowedUIDs []int
	// GID, when at least 0, is a group that shares the socket: its
	// directory is 0750 and the socket 0660, both of that group. Below
	// 0 (NoGroup): the directory is 0700 and the socket 0600.
	GID int
	// Log receives one warning per refused connection (uid and pid, no
	// more); discarded when nil.
	Log *slog.Logger
}

// NoGroup is UnixOptions.GID when no group shares the socket.
const NoGroup = -1

// ListenUnix listens on path inside a private directory, created when
// missing. An existing directory must be ours and no more open than the
// options allow (0700, or 0750 of the shared group). A live socket at
// path is an error; a stale one is replaced. A connection from a uid not
// allowed is never served: it gets one line naming the users the socket
// admits (RefusalPrefix) and is closed.
func ListenUnix(path string, o UnixOptions) (net.Listener, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Name == "" {
		o.Name = "socket"
	}
	allowed := o.AllowedUIDs
	if len(allowed) == 0 {
		allowed = []int{os.Getuid()}
	}
	if err := privateDir(filepath.Dir(path), o); err != nil {
		return nil, err
	}
	// Remove a stale socket, never a live one.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s %s is in use by another process", o.Name, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %s: %w", o.Name, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	mode := os.FileMode(0o600)
	if o.GID >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, o.GID); err != nil {
			l.Close()
			return nil, fmt.Errorf("%s: give it to group %d: %w", o.Name, o.GID, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	return &peerCredListener{Listener: l, allowed: allowed, name: o.Name, log: o.Log, admits: users(allowed)}, nil
}

// RefusalPrefix starts the one line a socket of ListenUnix writes to a
// connection from a uid it does not admit, just before closing it: a
// client whose call failed (a reset, a gRPC "error reading server
// preface") reads it back with Refusal and tells its user why.
const RefusalPrefix = "airlock-peer-refused: "

// users names uids for a refusal: "uid 998 (airlock)", or the bare uid
// without an account.
func users(uids []int) string {
	var out []string
	for _, uid := range uids {
		out = append(out, userName(uid))
	}
	return strings.Join(out, ", ")
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// Refusal connects to the ListenUnix socket at path and returns what it
// says when it refuses this process's uid (without RefusalPrefix), or ""
// when it says nothing of the kind within a second (it admits this uid,
// or is no such socket). For a client whose call already failed: it
// costs a second when the socket admits the caller.
func Refusal(path string) string {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 512)).ReadString('\n')
	if err != nil {
		return ""
	}
	msg, ok := strings.CutPrefix(strings.TrimSpace(line), RefusalPrefix)
	if !ok {
		return ""
	}
	return msg
}

// CheckSocketDir is what a client checks before it connects to the
// socket at path and presents a token: the socket's directory must be
// one neither its group nor others may write. Whoever may write there
// could put a socket of their own in its place and receive the token
// (and, for the proxy handoff socket, a plugin's listener). name is
// what messages call the socket ("broker socket").
func CheckSocketDir(name, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return nil // the dial says what is missing
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s directory %s may be written by its group or others (mode %#o): another user could stand in for the %s; not connecting", name, dir, perm, name)
	}
	return nil
}

// privateDir creates dir (0700, or 0750 of the shared group) or checks
// that the existing one is ours and no more open than that.
func privateDir(dir string, o UnixOptions) error {
	want := os.FileMode(0o700)
	if o.GID >= 0 {
		want = 0o750
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s directory: %w", o.Name, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s directory: %w", o.Name, err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if sys == nil || int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%s directory %s must be owned by uid %d", o.Name, dir, os.Getuid())
	}
	perm := st.Mode().Perm()
	if o.GID >= 0 && perm == 0o700 {
		// Just created (or left private): open it to the group.
		if err := os.Chown(dir, -1, o.GID); err != nil {
			return fmt.Errorf("%s directory %s: give it to group %d: %w", o.Name, dir, o.GID, err)
		}
		if err := os.Chmod(dir, want); err != nil {
			return fmt.Errorf("%s directory: %w", o.Name, err)
		}
		return nil
	}
	if perm != want || (o.GID >= 0 && int(sys.Gid) != o.GID) {
		if o.GID >= 0 {
			return fmt.Errorf("%s directory %s must be mode 0750 and of group %d (it is %#o, group %d)", o.Name, dir, o.GID, perm, sys.Gid)
		}
		return fmt.Errorf("%s directory %s must be mode 0700 (it is %#o)", o.Name, dir, perm)
	}
	return nil
}

type peerCredListener struct {
	net.Listener
	allowed []int
	name    string
	log     *slog.Logger
	admits  string // the allowed uids, named
}

// Accept returns the next connection from an allowed uid.
func (l *peerCredListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := PeerCred(c)
		if err != nil {
			l.log.Warn(l.name+": cannot read peer credentials; connection closed", "err", err)
			Refused(l.name, "peer_credentials")
			c.Close()
			continue
		}
		if !slices.Contains(l.allowed, uid) {
			l.log.Warn(l.name+": peer uid not allowed; connection closed", "uid", uid, "pid", pid)
			Refused(l.name, "peer_uid")
			l.refuse(c, uid)
			continue
		}
		return &Conn{UnixConn: c.(*net.UnixConn), peer: Peer{UID: uid, PID: pid}}, nil
	}
}

// refuse tells a connection from a uid not admitted which ones are, in
// one line, and closes it. The write is bounded and off the accept loop:
// a peer that does not read cannot hold the listener up.
func (l *peerCredListener) refuse(c net.Conn, uid int) {
	line := RefusalPrefix + "the " + l.name + " admits " + l.admits + "; this connection came from " + userName(uid) + "\n"
	go func() {
		defer c.Close()
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, line)
		// Half-close and let the peer read the line before the close:
		// unread bytes it sent would otherwise reset the connection.
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
			_ = uc.SetReadDeadline(time.Now().Add(time.Second))
			_, _ = io.Copy(io.Discard, io.LimitReader(uc, 64<<10))
		}
	}()
}

// Peer is who connected to a socket of ListenUnix, as the kernel recorded
// it at connect(): what a refusal after the accept (a wrong token) is
// logged with.
type Peer struct {
	UID, PID int
}

// String is "uid=U pid=P".
func (p Peer) String() string { return fmt.Sprintf("uid=%d pid=%d", p.UID, p.PID) }

// Network is "unix": a Peer is the RemoteAddr of a Conn.
func (Peer) Network() string { return "unix" }

// LogAttrs are the peer's uid and pid as log attributes.
func (p Peer) LogAttrs() []any { return []any{"peer_uid", p.UID, "peer_pid", p.PID} }

// Conn is a connection ListenUnix accepted: its RemoteAddr is the Peer,
// so that servers on top (gRPC's peer.Peer, net/http's RemoteAddr) see
// who called.
type Conn struct {
	*net.UnixConn
	peer Peer
}

// RemoteAddr is the connection's Peer.
func (c *Conn) RemoteAddr() net.Addr { return c.peer }

// Peer is who connected.
func (c *Conn) Peer() Peer { return c.peer }

// PeerCred returns the uid and pid of a unix connection's peer, as the
// kernel recorded them at connect().
func PeerCred(c net.Conn) (uid, pid int, err error) {
	if pc, ok := c.(*Conn); ok {
		return pc.peer.UID, pc.peer.PID, nil
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, 0, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	return int(cred.Uid), int(cred.Pid), nil
}
