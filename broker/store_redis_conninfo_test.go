package broker

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// failInfo fails the next INFO with a timeout, as a slow server or a
// short deadline does, without sending it.
type failInfo struct{ armed atomic.Bool }

func (h *failInfo) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" && h.armed.CompareAndSwap(true, false) {
			err := context.DeadlineExceeded
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *failInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A new connection whose INFO timed out (a slow server, a resolve's
// short deadline) says nothing of which server it reached: it is not
// used as if it reached the known one, which would skip writing the
// journal again on a restarted server that lost a revocation.
func TestRedisConnectionWithoutInfoIsNotUsed(t *testing.T) {
	ctx := context.Background()
	r := testenv.Redis(t)
	b, s := newRedisBroker(t, r.Addr, nil)
	handle := revokedInSnapshotOnly(t, b, b, r.Addr, 0)
	h := &failInfo{}
	s.rdb.AddHook(h)
	r.Kill()
	if err := r.Start(); err != nil { // back from the snapshot
		t.Fatal(err)
	}
	h.armed.Store(true)
	for i := 0; i < 3; i++ {
		if g, err := b.Resolve(ctx, handle); err == nil {
			t.Fatalf("resolve %d after the restart: the revoked handle resolved again (plugin %s)", i, g.PluginID)
		}
	}
}
