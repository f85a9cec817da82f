package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A Redis that restarts having lost a revocation it acknowledged (it came
// back from a snapshot older than the revocation, or lost its last
// second of appendfsync everysec to a kill -9) does not make the handle
// resolve again on the replica that revoked it, not even for the moment
// before the feed notices the restart: the revocation is written again
// before the restarted server answers anything.
func TestRedisRestartThatLostARevocationKeepsIt(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, s := newRedisBroker(t, r.Addr, nil)
	startFeed(t, s)
	iss, err := b.Issue(ctx, IssueRequest{PluginID: "p", InvocationID: "inv-1", Intent: "example.read",
		Destinations: apiDest, Deadline: time.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	if err := rc.Save(ctx).Err(); err != nil { // the snapshot holds the live handle
		t.Fatal(err)
	}
	rc.Close()
	if n, err := b.RevokeInvocation(ctx, "inv-1"); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if _, err := b.Resolve(ctx, iss.Handle); !errors.Is(err, ErrHandleRevoked) {
		t.Fatalf("resolve after the revocation: %v", err)
	}
	r.Kill()
	if err := r.Start(); err != nil { // back from the snapshot
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if g, err := b.Resolve(ctx, iss.Handle); err == nil {
			t.Fatalf("resolve %d after the restart: the revoked handle resolved again (plugin %s)", i, g.PluginID)
		}
	}
}
