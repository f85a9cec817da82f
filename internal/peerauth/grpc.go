//go:build linux

package peerauth

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// UnixPeer is the AuthInfo of a gRPC connection accepted with
// PeerCredentials: who the kernel says connected.
type UnixPeer struct {
	credentials.CommonAuthInfo
	// UID and PID are the peer's, as SO_PEERCRED recorded them at
	// connect() and translated into this process's namespaces: a peer
	// outside them has the overflow uid (65534) and pid 0.
	UID, PID int
}

// AuthType names the kind of AuthInfo.
func (UnixPeer) AuthType() string { return "unix-peercred" }

// PeerCredentials are gRPC transport credentials for a unix socket: no
// encryption (the bytes never leave the machine), and the peer's uid and
// pid in each connection's AuthInfo, so that a server's interceptors can
// check and log who calls (on a client, the AuthInfo names the server). A
// connection whose peer credentials cannot be read is closed before a
// byte of it is read.
func PeerCredentials() credentials.TransportCredentials { return peerCreds{} }

// PeerOf returns the caller of the gRPC call in ctx, when its server used
// PeerCredentials.
func PeerOf(ctx context.Context) (UnixPeer, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return UnixPeer{}, false
	}
	if u, ok := p.AuthInfo.(UnixPeer); ok {
		return u, true
	}
	// A server without PeerCredentials on a socket of ListenUnix: its
	// connections name their Peer as their remote address.
	if a, ok := p.Addr.(Peer); ok {
		return UnixPeer{UID: a.UID, PID: a.PID}, true
	}
	return UnixPeer{}, false
}

type peerCreds struct{}

func (peerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return handshake(c)
}

func (peerCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return handshake(c)
}

func handshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uid, pid, err := PeerCred(c)
	if err != nil {
		return nil, nil, err
	}
	return c, UnixPeer{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, UID: uid, PID: pid}, nil
}

func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (peerCreds) Clone() credentials.TransportCredentials { return peerCreds{} }

func (peerCreds) OverrideServerName(string) error { return nil }
