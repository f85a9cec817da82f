package plugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The environment a host sets when it launches a provider.
const (
	CookieEnv    = "NUMINANCE_PLUGIN_COOKIE"
	ProtocolsEnv = "NUMINANCE_PLUGIN_PROTOCOLS"
	HostAddrEnv  = "NUMINANCE_HOST_ADDR"
	MagicCookie  = "numinance.plugin.v1/6d0b2f94-3c1e-4a58-9f7d-1e5b8a2c4d63"
)

// CoreProtocolVersion is the go-plugin core version of the handshake line.
const CoreProtocolVersion = 1

// MaxHandshakeLine is the most a host reads of the handshake line.
const MaxHandshakeLine = 1024

// MaxSocketPath is the longest socket path the line may name (the size of
// sockaddr_un.sun_path minus its terminator, on Linux and macOS alike).
const MaxSocketPath = 103

// ErrNotLaunchedByHost: the cookie is missing or wrong. The cookie is not
// a secret; it only stops a provider from being run by hand.
var ErrNotLaunchedByHost = errors.New("this program is a plugin/v1 provider: it is started by the plugin host, not by hand")

// ErrNoCommonVersion: the host offers no protocol version the provider
// speaks. Serve prints no handshake line.
var ErrNoCommonVersion = errors.New("the host serves no protocol version this provider speaks")

// ParseProtocols parses the NUMINANCE_PLUGIN_PROTOCOLS offer: a comma
// separated list of positive versions.
func ParseProtocols(s string) ([]uint32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no protocol versions offered")
	}
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil || n == 0 {
			return nil, errors.New("protocol versions must be positive integers")
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// Negotiate returns the highest version in both offer and speaks.
func Negotiate(offer, speaks []uint32) (uint32, error) {
	var best uint32
	for _, o := range offer {
		for _, s := range speaks {
			if o == s && o > best {
				best = o
			}
		}
	}
	if best == 0 {
		vs := make([]string, len(speaks))
		for i, v := range speaks {
			vs[i] = strconv.Itoa(int(v))
		}
		return 0, fmt.Errorf("%w (%s)", ErrNoCommonVersion, strings.Join(vs, ", "))
	}
	return best, nil
}

// FormatHandshakeLine is the line a provider prints:
// CORE|APP|unix|PATH|grpc.
func FormatHandshakeLine(app uint32, socket string) string {
	return fmt.Sprintf("%d|%d|unix|%s|grpc\n", CoreProtocolVersion, app, socket)
}
