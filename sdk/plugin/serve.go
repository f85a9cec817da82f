package plugin

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"google.golang.org/grpc"
)

// ServeConfig configures Serve.
type ServeConfig struct {
	// Versions are the app protocol versions the provider speaks; [1] when
	// empty.
	Versions []uint32
	// Register adds the provider's services (PluginService at least).
	Register func(s *grpc.Server, rt *Runtime)
	// Stdout receives the handshake line; os.Stdout when nil.
	Stdout io.Writer
	// Getenv reads the environment; os.Getenv when nil (tests set it).
	// With os.Getenv, the launch keys are removed from the environment
	// once read.
	Getenv func(string) string
}

// Runtime is a serving provider. Stop ends Serve.
type Runtime struct {
	// Version is the negotiated app protocol version.
	Version uint32
	// Socket is the path of the provider's unix socket.
	Socket string

	srv  *grpc.Server
	rep  *reporter
	dir  string
	once sync.Once
	done chan struct{}
}

// Stop stops serving and removes the socket directory. A provider's
// Shutdown handler answers first, then calls Stop in a goroutine.
func (r *Runtime) Stop() {
	r.once.Do(func() {
		r.srv.GracefulStop()
		r.rep.close()
		os.RemoveAll(r.dir)
		close(r.done)
	})
}

// Serve checks the cookie, negotiates the protocol version, reads the
// launch keys, listens on a unix socket in a new 0700 directory, prints
// the handshake line and serves until Stop, SIGINT or SIGTERM. Every call
// must carry the key of the host that launched the provider: any other is
// refused (Unauthenticated) before a handler runs, and reported to the
// host.
func Serve(cfg ServeConfig) error {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv(CookieEnv) != MagicCookie {
		return ErrNotLaunchedByHost
	}
	offer, err := ParseProtocols(getenv(ProtocolsEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", ProtocolsEnv, err)
	}
	speaks := cfg.Versions
	if len(speaks) == 0 {
		speaks = []uint32{1}
	}
	version, err := Negotiate(offer, speaks)
	if err != nil {
		return err
	}
	keys, err := keysFor(cfg.Getenv)
	if err != nil {
		return err
	}
	servedKey.Store(&keys.pluginKey)
	dir, sock, err := socketDir()
	if err != nil {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("listen on the provider socket: %w", err)
	}
	if cfg.Register == nil {
		l.Close()
		os.RemoveAll(dir)
		return errors.New("ServeConfig.Register is required")
	}
	rep := startReporter(getenv(HostAddrEnv), keys.pluginKey)
	g := &guard{hostDigest: keys.hostDigest, report: rep.report}
	srv := grpc.NewServer(grpc.Creds(serverCredentials()),
		grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream))
	rt := &Runtime{Version: version, Socket: sock, srv: srv, rep: rep, dir: dir, done: make(chan struct{})}
	cfg.Register(rt.srv, rt)
	out := cfg.Stdout
	if out == nil {
		out = os.Stdout
	}
	if _, err := io.WriteString(out, FormatHandshakeLine(version, sock)); err != nil {
		l.Close()
		rt.Stop()
		return fmt.Errorf("print the handshake line: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			rt.Stop()
		case <-rt.done:
		}
	}()
	err = rt.srv.Serve(l)
	rt.Stop()
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Main runs Serve and exits: 0 after a clean stop, 1 with a message on
// stderr otherwise (including ErrNotLaunchedByHost).
func Main(cfg ServeConfig) {
	if err := Serve(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// socketDir makes a new 0700 directory holding the socket path, falling
// back to /tmp when TMPDIR would make the path too long.
func socketDir() (string, string, error) {
	for _, base := range []string{os.TempDir(), "/tmp"} {
		dir, err := os.MkdirTemp(base, "nump")
		if err != nil {
			continue
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			os.RemoveAll(dir)
			continue
		}
		sock := filepath.Join(dir, "p.sock")
		if len(sock) <= MaxSocketPath {
			return dir, sock, nil
		}
		os.RemoveAll(dir)
	}
	return "", "", errors.New("no temporary directory gives a socket path short enough")
}
