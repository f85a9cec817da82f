package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// `airlock serve` serves its broker on a unix socket; `airlock host`, in
// another process, dials it with the token file and asks for handles as
// if the broker were in process.
func Example() {
	dir, _ := os.MkdirTemp("", "broker-api-example-")
	defer os.RemoveAll(dir)
	secrets := filepath.Join(dir, "secrets.yaml")
	_ = os.WriteFile(secrets, []byte("tickets/api:\n  token: example-token\n"), 0o600)
	cfg := broker.Config{Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{
		"tickets.read": {
			Class:  broker.ClassRead,
			Secret: broker.SecretRef{Source: broker.SourceFile, Path: "tickets/api", Field: "token"},
			Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}},
		},
	}}.WithDefaults()
	b := broker.New(cfg, broker.NewMemoryStore(cfg.Store.MaxHandles, cfg.ExpiredRetention, cfg.MaxHandleLifetime, nil),
		broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}},
			cfg.Secrets.CacheTTL, cfg.Secrets.StaleIfError, nil, nil), broker.Options{})

	// The serving side.
	tokenFile := filepath.Join(dir, "broker.token")
	tok, err := peerauth.EnsureToken("broker.api.token_file", tokenFile, peerauth.NoGroup)
	if err != nil {
		fmt.Println(err)
		return
	}
	sock := filepath.Join(dir, "broker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := grpc.NewServer(api.AuthOptions(tok, nil)...)
	(&api.Service{Broker: b}).Register(g)
	go func() { _ = g.Serve(l) }()
	defer g.Stop()

	// The host's side.
	c, err := api.Dial("unix://"+sock, api.DialOptions{TokenFile: tokenFile})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	iss, err := c.Issue(ctx, broker.IssueRequest{PluginID: "example.tickets", InvocationID: "inv-1", Intent: "tickets.read",
		Destinations: []broker.Destination{{Host: "api.example.com"}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("handle:", strings.HasPrefix(iss.Handle, broker.HandlePrefix))
	n, err := c.RevokeInvocation(ctx, "inv-1")
	fmt.Println("revoked:", n, err)
	_, err = b.Resolve(ctx, iss.Handle)
	fmt.Println("refused:", errors.Is(err, broker.ErrHandleRevoked))
	// Output:
	// handle: true
	// revoked: 1 <nil>
	// refused: true
}
