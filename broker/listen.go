package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
)

// APIConfig says where the broker API listens (the `broker.api:` section).
type APIConfig struct {
	// Socket is the unix socket path. Its directory is created with mode
	// 0700 (or must already be 0700 and ours). Empty: no unix listener.
	Socket string `yaml:"socket"`
	// AllowedUIDs may connect to the socket (checked with SO_PEERCRED);
	// default: the uid airlock runs as.
	AllowedUIDs []int `yaml:"allowed_uids"`
	// TCP, optional, always with mutual TLS.
	TCP TCPConfig `yaml:"tcp"`
}

// TCPConfig is the optional TCP listener; every field is required when
// Listen is set, and clients must present a certificate ClientCAFile signed.
type TCPConfig struct {
	Listen       string `yaml:"listen"`
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Validate returns every problem at once.
func (c APIConfig) Validate() error {
	var errs []error
	if c.Socket != "" && !filepath.IsAbs(c.Socket) {
		errs = append(errs, errors.New("broker.api.socket: must be an absolute path"))
	}
	if len(c.Socket) > 107 {
		errs = append(errs, errors.New("broker.api.socket: longer than a unix socket path may be (107 bytes)"))
	}
	for _, u := range c.AllowedUIDs {
		if u < 0 {
			errs = append(errs, errors.New("broker.api.allowed_uids: uids are not negative"))
			break
		}
	}
	if t := c.TCP; t.Listen != "" {
		if _, _, err := net.SplitHostPort(t.Listen); err != nil {
			errs = append(errs, errors.New("broker.api.tcp.listen: must be host:port"))
		}
		if t.CertFile == "" || t.KeyFile == "" || t.ClientCAFile == "" {
			errs = append(errs, errors.New("broker.api.tcp: cert_file, key_file and client_ca_file are required (mutual TLS)"))
		}
	}
	return errors.Join(errs...)
}

// ListenUnix listens on path inside a private directory. Connections from
// a uid not in allowed are closed before any byte is read.
func ListenUnix(path string, allowed []int, log *slog.Logger) (net.Listener, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(allowed) == 0 {
		allowed = []int{os.Getuid()}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("broker socket directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("broker socket directory: %w", err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if st.Mode().Perm() != 0o700 || sys == nil || int(sys.Uid) != os.Getuid() {
		return nil, fmt.Errorf("broker socket directory %s must be mode 0700 and owned by uid %d", dir, os.Getuid())
	}
	// Remove a stale socket, never a live one.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("broker socket %s is in use by another process", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale broker socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("broker socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("broker socket: %w", err)
	}
	return &peerCredListener{Listener: l, allowed: allowed, log: log}, nil
}

type peerCredListener struct {
	net.Listener
	allowed []int
	log     *slog.Logger
}

// Accept returns the next connection from an allowed uid.
func (l *peerCredListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerCred(c)
		if err != nil {
			l.log.Warn("broker API: cannot read peer credentials; connection closed", "err", err)
			c.Close()
			continue
		}
		if !slices.Contains(l.allowed, uid) {
			l.log.Warn("broker API: peer uid not allowed; connection closed", "uid", uid, "pid", pid)
			c.Close()
			continue
		}
		return c, nil
	}
}

func peerCred(c net.Conn) (uid, pid int, err error) {
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

// TCPCredentials returns server credentials for mutual TLS (TLS 1.3,
// client certificate required and verified against ClientCAFile).
func TCPCredentials(c TCPConfig) (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("broker.api.tcp: server certificate: %w", err)
	}
	pem, err := os.ReadFile(c.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("broker.api.tcp.client_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("broker.api.tcp.client_ca_file: no PEM certificate in it")
	}
	return credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}), nil
}
