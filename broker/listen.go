package broker

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/airlock-dev/airlock/internal/hostport"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// APIConfig says where the broker API listens and who may call it (the
// `broker.api:` section). Every call, on every listener, presents the
// token in TokenFile.
type APIConfig struct {
	// Socket is the unix socket path. Its directory is created with mode
	// 0700 (0750 with Group), or must already be so and ours. Empty: no
	// unix listener.
	Socket string `yaml:"socket"`
	// AllowedUIDs and AllowedUsers (names) may connect to the socket
	// (checked with SO_PEERCRED); default: the uid airlock runs as.
	AllowedUIDs  []int    `yaml:"allowed_uids"`
	AllowedUsers []string `yaml:"allowed_users"`
	// Group (a name or number) shares the socket and the token file with
	// the host when it runs as another user: the socket's directory is
	// 0750 and the socket 0660 of that group, and the token file 0640.
	// Empty: owner only.
	Group string `yaml:"group"`
	// TokenFile holds the bearer token every caller presents (gRPC
	// metadata "authorization: Bearer …"). airlock serve creates it when
	// missing (256 random bits, 0600, or 0640 with Group) and refuses one
	// others may read; the host and the CLI read it. Default: broker.token
	// beside Socket.
	TokenFile string `yaml:"token_file"`
	// TCP, optional, always with mutual TLS (and the token).
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

// DefaultTokenFile is the token file's name beside the socket.
const DefaultTokenFile = "broker.token"

// WithDefaults puts the token file beside the socket when unset.
func (c APIConfig) WithDefaults() APIConfig {
	if c.TokenFile == "" && c.Socket != "" {
		c.TokenFile = filepath.Join(filepath.Dir(c.Socket), DefaultTokenFile)
	}
	return c
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
	if c.TokenFile != "" && !filepath.IsAbs(c.TokenFile) {
		errs = append(errs, errors.New("broker.api.token_file: must be an absolute path"))
	}
	if c.TokenFile == "" && (c.Socket != "" || c.TCP.Listen != "") {
		errs = append(errs, errors.New("broker.api.token_file: required (every broker API call presents its token)"))
	}
	for _, u := range c.AllowedUIDs {
		if u < 0 {
			errs = append(errs, errors.New("broker.api.allowed_uids: uids are not negative"))
			break
		}
	}
	if t := c.TCP; t.Listen != "" {
		if err := hostport.Listen(t.Listen); err != nil {
			errs = append(errs, fmt.Errorf("broker.api.tcp.listen: %w", err))
		}
		if t.CertFile == "" || t.KeyFile == "" || t.ClientCAFile == "" {
			errs = append(errs, errors.New("broker.api.tcp: cert_file, key_file and client_ca_file are required (mutual TLS)"))
		}
	}
	return errors.Join(errs...)
}

// Peers resolves who may connect to the socket: the group's id (or
// peerauth.NoGroup) and the allowed uids (AllowedUIDs and AllowedUsers;
// empty means this process's uid).
func (c APIConfig) Peers() (gid int, uids []int, err error) {
	gid, gerr := peerauth.LookupGroup(c.Group)
	if gerr != nil {
		gerr = errors.New("broker.api.group: " + gerr.Error())
	}
	named, uerr := peerauth.LookupUIDs(c.AllowedUsers)
	if uerr != nil {
		uerr = errors.New("broker.api.allowed_users: " + uerr.Error())
	}
	return gid, append(append([]int(nil), c.AllowedUIDs...), named...), errors.Join(gerr, uerr)
}
