//go:build linux

package plugin

import (
	"context"

	"google.golang.org/grpc/credentials"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// serverCredentials give every call's peer uid and pid (SO_PEERCRED), so
// that a refused caller can be named to the host.
func serverCredentials() credentials.TransportCredentials { return peerauth.PeerCredentials() }

// callerOf is the uid and pid of the call's peer, as this process's
// namespaces see them (0 for a pid outside its pid namespace).
func callerOf(ctx context.Context) (uid, pid int, known bool) {
	p, ok := peerauth.PeerOf(ctx)
	return p.UID, p.PID, ok
}
