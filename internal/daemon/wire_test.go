package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/broker"
)

// The broker's loops — the handle store's sweep, the lease manager with
// its final revocation sweep, the owed revocations — have all returned
// when its run does: the daemon closes the store right after, so a loop
// still running would race it (and the process's exit).
func TestBrokerRunJoinsItsLoops(t *testing.T) {
	cfg := testConfig(t)
	cfg.Broker.Intents = map[string]broker.Intent{"mq": {Class: broker.ClassWrite,
		Secret: broker.SecretRef{Source: broker.SourceVaultLease, Mount: "rabbitmq", Path: "creds/plugin", Field: "password"},
		Inject: broker.Inject{Kind: &broker.BasicInject{UsernameField: "username"}}}}
	cfg.Broker = cfg.Broker.WithDefaults()
	_, run, closeBroker, err := newBroker(cfg, nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBroker()
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the loops start, see the end at once, and finish their last work
	// One P: a loop run has not joined has not even been scheduled when
	// run returns, so the check below cannot pass by luck.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	run(ctx)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	// A goroutine not yet scheduled shows only where it was created.
	for _, loop := range []string{"broker.(*Leases).Run", "broker.(*Broker).RunOwed", "broker.(*MemoryStore).Run",
		"daemon.newBroker", "daemon.runAll"} {
		if strings.Contains(stacks, loop) {
			t.Errorf("a goroutine of %s is left after the broker's run returned", loop)
		}
	}
}
