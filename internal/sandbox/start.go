//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initArg marks the re-executed binary as the sandbox init (Init).
const initArg = "__airlock-sandbox-init"

// Errors of Command and Box.Start.
var (
	ErrUnavailable = errors.New("the sandbox level asked for is not available on this machine")
	ErrNotVisible  = errors.New("the plugin's program is not visible inside the sandbox")
	ErrSetup       = errors.New("the sandbox could not be set up")
	// ErrNoUID: a root host found no uid of host.sandbox.uid_range to
	// give the plugin.
	ErrNoUID = errors.New("no uid of host.sandbox.uid_range is free for the plugin")
)

// Box is the host's side of one sandboxed plugin process: the relays
// from the sandbox's loopback to the real endpoints, and what the init
// reports. Start after the command has started; Wait after it exited.
type Box struct {
	Level Level

	spec  Spec
	ctrl  *os.File   // our end of the control socket
	close []*os.File // the child's copies, closed after the start
	log   *slog.Logger

	mu        sync.Mutex
	served    []io.Closer // listeners another server took over
	waited    bool
	reading   bool // readExit runs
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	relays    sync.WaitGroup
	exit      chan Exit
}

// Command returns the command that runs spec in a sandbox at level (a
// resolved level: see Resolve) and the box that goes with it. The caller
// sets Stdin/Stdout/Stderr and starts it (process group and death signal
// are already set), then calls Box.Start.
func Command(spec Spec, level Level, log *slog.Logger) (*exec.Cmd, *Box, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	spec.Limits = spec.Limits.WithDefaults()
	spec.Relays = slices.Clone(spec.Relays) // Own listeners become the box's
	b := &Box{Level: level, spec: spec, log: log, conns: map[net.Conn]struct{}{}, exit: make(chan Exit, 1)}
	if level == LevelOff {
		cmd := exec.Command(spec.Path, spec.Args...)
		cmd.Env, cmd.Dir = spec.Env, spec.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd, b, nil
	}
	if err := visible(spec); err != nil {
		return nil, nil, err
	}
	is := initSpec{Level: level, Name: spec.Name, Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir,
		Hide: withRealPaths(spec.Hide), Limits: spec.Limits}
	if os.Geteuid() == 0 {
		if spec.UID <= 0 {
			return nil, nil, fmt.Errorf("%w: a root host runs a plugin only under a uid of its own (Config.PluginUID)", ErrSetup)
		}
		is.UID = spec.UID
	}
	var files []*os.File
	fail := func(err error) (*exec.Cmd, *Box, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	files = append(files, specR)
	defer specW.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	b.ctrl = os.NewFile(uintptr(pair[0]), "sandbox-control")
	child := os.NewFile(uintptr(pair[1]), "sandbox-control-child")
	files = append(files, child)
	if level == LevelNamespaces {
		mounts, err := nsMounts(spec)
		if err != nil {
			b.ctrl.Close()
			return fail(err)
		}
		is.Mounts = mounts
		for _, r := range spec.Relays {
			is.Listen = append(is.Listen, r.PluginAddr(level))
		}
	} else {
		for _, r := range spec.Relays {
			is.Ports = append(is.Ports, r.port(level))
		}
		is.Mounts = landlockPaths(spec)
	}
	data, err := json.Marshal(is)
	if err != nil || len(data) > 60<<10 {
		b.ctrl.Close()
		return fail(fmt.Errorf("%w: the sandbox description is too large (too many paths)", ErrSetup))
	}
	if _, err := specW.Write(data); err != nil {
		b.ctrl.Close()
		return fail(err)
	}
	if is.UID > 0 {
		// The plugin runs as its own uid: its directory must be its own.
		if err := os.Chown(spec.Dir, is.UID, is.UID); err != nil {
			b.ctrl.Close()
			return fail(fmt.Errorf("%w: handing the private directory to the plugin's uid: %w", ErrSetup, err))
		}
	}
	cmd := exec.Command("/proc/self/exe", initArg)
	cmd.Args[0] = "airlock-sandbox"
	cmd.Env = initEnv()
	cmd.Dir = "/"
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if level == LevelNamespaces {
		nsAttrs(cmd.SysProcAttr, is.UID)
	}
	b.close = files
	return cmd, b, nil
}

// withRealPaths is paths and, for each that reaches a different place
// through a symbolic link, its real path too: a hidden path is compared
// with the grants as written and as resolved, so that a grant or a
// setting written through a link (state_dir under /var/run, a grant of
// /run) cannot uncover it.
func withRealPaths(paths []string) []string {
	out := slices.Clone(paths)
	for _, p := range paths {
		if rp, err := filepath.EvalSymlinks(p); err == nil && rp != filepath.Clean(p) && !slices.Contains(out, rp) {
			out = append(out, rp)
		}
	}
	return out
}

// visible reports whether spec.Path lies in a directory the plugin sees.
func visible(spec Spec) error {
	dirs := slices.Concat(systemDirs, spec.ReadOnly, []string{spec.InstallDir, spec.Dir})
	p, err := filepath.EvalSymlinks(spec.Path)
	if err != nil {
		p = spec.Path
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			rd = d
		}
		if within(spec.Path, d) || within(p, rd) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is outside the system directories and the plugin's install directory: grant its directory in host.sandbox.read_only or host.sandbox.plugins.%s.read_only", ErrNotVisible, spec.Path, spec.Name)
}

func within(p, dir string) bool {
	dir = filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// Start finishes the start after cmd.Start: it closes the child's ends,
// waits for the init's setup report and starts the relays. On error the
// init exits by itself (the caller still waits for the process).
func (b *Box) Start(ctx context.Context) error {
	for _, f := range b.close {
		f.Close()
	}
	b.close = nil
	if b.Level == LevelOff {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = b.ctrl.SetReadDeadline(time.Now()) })
	defer stop()
	var rep setupReport
	fds, err := b.recv(&rep)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSetup, err)
	}
	_ = b.ctrl.SetReadDeadline(time.Time{})
	if rep.Err != "" {
		return fmt.Errorf("%w: %s", ErrSetup, rep.Err)
	}
	if b.Level == LevelNamespaces {
		if len(fds) != len(b.spec.Relays) {
			closeFDs(fds)
			return fmt.Errorf("%w: the init handed back %d listeners for %d relays", ErrSetup, len(fds), len(b.spec.Relays))
		}
		for i, fd := range fds {
			f := os.NewFile(uintptr(fd), "relay")
			l, err := net.FileListener(f)
			f.Close()
			if err != nil {
				closeFDs(fds[i+1:])
				return fmt.Errorf("%w: relay listener: %w", ErrSetup, err)
			}
			if err := b.take(l, b.spec.Relays[i]); err != nil {
				closeFDs(fds[i+1:])
				return err
			}
		}
	} else {
		owns := b.ownRelays()
		for i, r := range owns {
			if err := b.take(r.Own, r); err != nil {
				for _, o := range owns[i+1:] {
					o.Own.Close()
				}
				return err
			}
		}
	}
	b.mu.Lock()
	b.reading = true
	b.mu.Unlock()
	go b.readExit()
	return nil
}

// ownRelays returns the relays with a listener of the plugin's own
// (Listen) and clears them from the spec: from here take or Wait closes
// each.
func (b *Box) ownRelays() []Relay {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Relay
	for i, r := range b.spec.Relays {
		if r.Own != nil {
			out = append(out, r)
			b.spec.Relays[i].Own = nil
		}
	}
	return out
}

// take has the proxy serve l, the plugin's listener for r, or, for a
// relay without Serve (a proxy elsewhere, the files endpoint), relays it
// to r.Target. A proxy that refuses the listener fails the start: a
// relayed connection would reach the shared proxy port, where the proxy
// cannot tell whose it is (and so whose handles it may carry).
func (b *Box) take(l net.Listener, r Relay) error {
	if r.Serve != nil {
		c, err := r.Serve(l)
		if err != nil {
			l.Close()
			return fmt.Errorf("%w: the egress proxy did not take the plugin's listener: %w", ErrSetup, err)
		}
		b.mu.Lock() // l is the server's now
		b.served = append(b.served, c)
		waited := b.waited
		b.mu.Unlock()
		if waited {
			c.Close()
		}
		return nil
	}
	b.mu.Lock()
	if b.waited {
		b.mu.Unlock()
		l.Close()
		return nil
	}
	b.listeners = append(b.listeners, l)
	b.relays.Add(1)
	b.mu.Unlock()
	go b.relay(l, r.Target)
	return nil
}

// recv reads one control message into v and the descriptors it carries.
func (b *Box) recv(v any) ([]int, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(16*4))
	rc, err := b.ctrl.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
	}
	if n == 0 {
		closeFDs(fds)
		return nil, errors.New("the init exited before it reported")
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		closeFDs(fds)
		return nil, errors.New("the init's report is not readable")
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (b *Box) readExit() {
	var e Exit
	for {
		var m initMessage
		fds, err := b.recv(&m)
		if err != nil {
			break
		}
		closeFDs(fds)
		if m.Refusal == nil {
			e = m.Exit
			break
		}
		b.log.Warn("the sandbox refused a system call of the plugin", "call", m.Refusal.Call, "reason", m.Refusal.Reason)
	}
	if len(e.Refused) > 0 {
		b.log.Info("the sandbox's refusals over the plugin's run", "refused", e.Refused)
	}
	b.exit <- e
	close(b.exit)
}

// Wait is called once the process has exited: it stops the relays and
// returns what the init reported of the end.
func (b *Box) Wait() Exit {
	for _, r := range b.ownRelays() { // never handed over: the start failed
		r.Own.Close()
	}
	b.mu.Lock()
	b.waited = true
	reading := b.reading
	for _, l := range b.listeners {
		l.Close()
	}
	for c := range b.conns {
		c.Close()
	}
	for _, c := range b.served {
		c.Close()
	}
	b.served = nil
	b.mu.Unlock()
	b.relays.Wait()
	var e Exit
	if reading {
		// The init reports before it exits; its exit is what called Wait.
		t := time.NewTimer(time.Second)
		select {
		case e = <-b.exit:
		case <-t.C:
		}
		t.Stop()
	}
	if b.ctrl != nil {
		b.ctrl.Close()
	}
	return e
}

// relay accepts the plugin's connections on l (inside its network
// namespace) and joins each to a new connection to target.
func (b *Box) relay(l net.Listener, target string) {
	defer b.relays.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		b.relays.Add(1)
		go b.join(c, target)
	}
}

func (b *Box) join(c net.Conn, target string) {
	defer b.relays.Done()
	if !b.track(c) {
		c.Close()
		return
	}
	defer b.untrack(c)
	u, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		b.log.Warn("sandbox relay: the endpoint did not answer", "target", target, "err", err)
		return
	}
	if !b.track(u) {
		u.Close()
		return
	}
	defer b.untrack(u)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		if tc, ok := u.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, u)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-done
}

// track registers c for closing at Wait; false once Wait has begun.
func (b *Box) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waited {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Box) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.Close()
}
