//go:build !linux

package plugin

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// serverCredentials: Airlock runs providers on Linux only; elsewhere the
// SDK builds (for authors' editors and unit tests) without peer
// credentials.
func serverCredentials() credentials.TransportCredentials { return insecure.NewCredentials() }

func callerOf(context.Context) (uid, pid int, known bool) { return 0, 0, false }
