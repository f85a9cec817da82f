package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// The host asks the broker for a handle when a plugin calls
// RequestCredential; the proxy resolves the handle and reads the secret
// behind it. The plugin only ever sees the handle, and revoking the
// invocation makes it worthless at once.
func Example() {
	dir, _ := os.MkdirTemp("", "broker-example-")
	defer os.RemoveAll(dir)
	secrets := filepath.Join(dir, "secrets.yaml") // 0600: the broker refuses a file others may read
	_ = os.WriteFile(secrets, []byte("tickets/api:\n  token: example-token\n"), 0o600)

	cfg := broker.Config{
		EgressProxy: "127.0.0.1:8899",
		Secrets:     broker.SecretsConfig{File: secrets},
		Intents: map[string]broker.Intent{
			"tickets.read": {
				Class:  broker.ClassRead,
				Secret: broker.SecretRef{Source: broker.SourceFile, Path: "tickets/api", Field: "token"},
				Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}},
			},
		},
	}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	store := broker.NewMemoryStore(cfg.Store.MaxHandles, cfg.ExpiredRetention, cfg.MaxHandleLifetime, nil)
	cache := broker.NewSecretCache(map[string]broker.SecretSource{
		broker.SourceFile: &broker.FileSource{Path: secrets},
	}, cfg.Secrets.CacheTTL, cfg.Secrets.StaleIfError, nil, nil)
	b := broker.New(cfg, store, cache, broker.Options{})

	ctx := context.Background()
	issued, err := b.Issue(ctx, broker.IssueRequest{
		PluginID:     "example.tickets",
		InvocationID: "inv-1",
		Intent:       "tickets.read",
		Destinations: []broker.Destination{{Host: "api.example.com"}}, // from the plugin's manifest
		Deadline:     time.Now().Add(time.Minute),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("handle for the plugin:", strings.HasPrefix(issued.Handle, broker.HandlePrefix), "via", issued.EgressProxy)

	// What the proxy does with the handle a request carries.
	g, err := b.Resolve(ctx, issued.Handle)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("grant:", g.PluginID, g.Intent, g.Class, g.Destinations[0].Host)
	sec, err := b.Secret(ctx, g, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("secret read for injection:", sec.Value == "example-token")

	// The invocation ends: the host revokes its handles.
	n, _ := b.RevokeInvocation(ctx, "inv-1")
	_, err = b.Resolve(ctx, issued.Handle)
	fmt.Println("revoked:", n, errors.Is(err, broker.ErrHandleRevoked))
	// Output:
	// handle for the plugin: true via 127.0.0.1:8899
	// grant: example.tickets tickets.read read api.example.com
	// secret read for injection: true
	// revoked: 1 true
}

// ParseDestination reads the short form manifests and configs use.
func ExampleParseDestination() {
	d, err := broker.ParseDestination("https://api.example.com:8443/v1/")
	fmt.Println(d.Host, d.Port, d.PathPrefix, err)
	fmt.Println(broker.HostMatches("*.example.com", "api.example.com"), broker.HostMatches("*.example.com", "a.b.example.com"))
	// Output:
	// api.example.com 8443 /v1/ <nil>
	// true false
}
