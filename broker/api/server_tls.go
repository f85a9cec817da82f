package api

import (
	"google.golang.org/grpc/credentials"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// TCPCredentials returns server credentials for mutual TLS (TLS 1.3,
// client certificate required and verified against ClientCAFile).
func TCPCredentials(c broker.TCPConfig) (credentials.TransportCredentials, error) {
	tc, err := peerauth.MutualTLS("broker.api.tcp", c.CertFile, c.KeyFile, c.ClientCAFile)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}
