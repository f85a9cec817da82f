package pluginv1

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/lease"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/testenv"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// leasedFixture is the host fixture whose tickets intents are a RabbitMQ
// user per invocation (Vault's RabbitMQ engine, a real rabbitmq-server),
// injected as Basic auth.
func leasedFixture(t *testing.T) (*hostFixture, *testenv.RabbitMQServer) {
	t.Helper()
	v, rmq := testenv.Vault(t), testenv.RabbitMQ(t)
	mount := "rabbitmq-" + rand.Text()[:8]
	v.MountRabbitMQ(t, mount, rmq, 10*time.Minute)
	f := newHostFixtureBroker(t, 0, func(bc *broker.Config, store broker.Store) broker.Options {
		ref := broker.SecretRef{Source: broker.SourceVaultLease, Mount: mount, Path: "creds/plugin", Field: "password"}
		inj := broker.Inject{Kind: &broker.BasicInject{UsernameField: "username"}}
		for _, name := range []string{"tickets.read", "tickets.write"} {
			in := bc.Intents[name]
			in.Secret, in.Inject = ref, inj
			bc.Intents[name] = in
		}
		if err := bc.Validate(); err != nil {
			t.Fatal(err)
		}
		leases, err := lease.New(*bc, v.Client(t), store.(broker.LeaseStore), lease.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(leases.Start())
		return broker.Options{Leases: leases}
	})
	return f, rmq
}

// basicCreds decodes an Authorization: Basic header.
func basicCreds(t *testing.T, h string) (string, string) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
	user, pass, ok := strings.Cut(string(raw), ":")
	if err != nil || !ok || !strings.HasPrefix(h, "Basic ") {
		t.Fatal("the upstream got no Basic credential")
	}
	return user, pass
}

// Each ending of an invocation — success, failure (the caller cancels
// it), deadline, the plugin crashing, the host shutting down — deletes the invocation's RabbitMQ user: the
// credential the upstream got works while the call runs and is refused
// as soon as the host reports the outcome; the outcome evidence names the
// lease it revoked by fingerprint.
func TestLeasedUserDiesWithInvocation(t *testing.T) {
	t.Parallel() // launches plugins: waits more than it computes
	for _, ending := range []string{"success", "failure", "deadline", "crash", "shutdown"} {
		t.Run(ending, func(t *testing.T) {
			t.Parallel() // a fixture of its own; Vault and RabbitMQ are shared
			f, rmq := leasedFixture(t)
			ctx, cancelCall := context.WithCancel(context.Background())
			defer cancelCall()
			var invoke func(ctx context.Context, deadline time.Duration) (*host.Outcome, error)
			var p *Plugin
			var h *host.Host
			if ending == "shutdown" {
				h = newTestHost(t, f, func(o *host.Options) { o.ShutdownGrace = time.Second })
				if err := AddProvider(h, f.inst); err != nil {
					t.Fatal(err)
				}
				invoke = func(ctx context.Context, deadline time.Duration) (*host.Outcome, error) {
					return h.Invoke(ctx, f.inst.Name, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
						Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "x"}, Deadline: time.Now().Add(deadline)})
				}
			} else {
				var err error
				if p, err = Launch(ctx, f.inst, f.opts); err != nil {
					t.Fatal(err)
				}
				defer p.Shutdown(ctx)
				invoke = func(ctx context.Context, deadline time.Duration) (*host.Outcome, error) {
					return p.Invoke(ctx, host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/CreateTicket",
						Input: &ticketsv1.CreateTicketRequest{Project: "core", Title: "x"}, Deadline: time.Now().Add(deadline)})
				}
			}
			deadline := time.Minute
			if ending == "deadline" {
				deadline = 5 * time.Second
			}
			f.slowPost.Store(true) // the upstream holds the provider's POST
			done := make(chan *host.Outcome, 1)
			go func() {
				out, err := invoke(ctx, deadline)
				if err != nil {
					t.Error(err)
				}
				done <- out
			}()
			var auth string
			select {
			case auth = <-f.seenAuth:
			case <-time.After(time.Minute):
				t.Fatal("the provider never reached the upstream")
			}
			user, pass := basicCreds(t, auth)
			if code, err := rmq.WhoAmI(user, pass); err != nil || code != http.StatusOK {
				t.Fatalf("the invocation's credential during the call: %d %v", code, err)
			}
			want := host.CallFailed
			switch ending {
			case "success":
				want = host.CallSucceeded
				close(f.block)
			case "failure":
				cancelCall()
			case "crash":
				p.Kill()
			case "shutdown":
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				go h.Shutdown(sctx)
			}
			out := <-done
			if out == nil || out.Status != want {
				t.Fatalf("outcome: %+v, want %v", out, want)
			}
			// The host revokes before it reports the outcome: the user is
			// gone now.
			if code, err := rmq.WhoAmI(user, pass); err != nil || code != http.StatusUnauthorized {
				t.Fatalf("the credential after the %s: %d %v; want 401", ending, code, err)
			}
			b, _ := os.ReadFile(f.evidence)
			var outcome string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"invocation.outcome"`) && strings.Contains(line, out.InvocationID) {
					outcome = line
				}
			}
			if !strings.Contains(outcome, `"leases_revoked":[{"intent":"tickets.write","lease_fp":"`) || !strings.Contains(outcome, `"revoked":true`) {
				t.Fatalf("the outcome evidence lacks the revoked lease: %s", outcome)
			}
		})
	}
}
