package broker

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A primary that followed another for a while (a failover and a
// failback, or an operator's REPLICAOF) took that one's data, without a
// revocation made on it before: it is a new primary though its run id is
// the same, and the replica that made the revocation writes it again.
func TestRedisPrimaryPromotedAgainKeepsRevocation(t *testing.T) {
	ctx := context.Background()
	x, y := testenv.Redis(t), testenv.Redis(t)
	b, s := newRedisBroker(t, x.Addr, nil)
	s.feedPing = 50 * time.Millisecond
	startFeed(t, s)
	iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-1", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	xc, yc := redis.NewClient(&redis.Options{Addr: x.Addr}), redis.NewClient(&redis.Options{Addr: y.Addr})
	defer xc.Close()
	defer yc.Close()
	follow := func(c *redis.Client, addr string) {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		leader := redis.NewClient(&redis.Options{Addr: addr})
		defer leader.Close()
		if err := leader.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if info, _ := c.Info(ctx, "replication").Result(); strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the replica never synced")
			}
		}
	}
	follow(yc, x.Addr) // y holds the handle live
	if err := yc.ReplicaOf(ctx, "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.RevokeInvocation(ctx, "inv-1"); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	follow(xc, y.Addr) // x takes y's data, without the revocation
	if err := xc.ReplicaOf(ctx, "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := b.Resolve(ctx, iss.Handle)
		if errors.Is(err, ErrHandleRevoked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("x promoted again lost the revocation: resolve %v", err)
		}
	}
}
