package broker_test

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/broker/internal/ledgertest"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func memoryPair(t *testing.T) (broker.Ledger, broker.Ledger) {
	s := broker.NewMemoryStore(1000, time.Minute, time.Hour, nil)
	return s, s
}

// redisPair is two RedisStores on one real redis-server.
func redisPair(t *testing.T) (broker.Ledger, broker.Ledger) {
	r := testenv.Redis(t)
	return broker.NewLedgerStore(t, r.Addr), broker.NewLedgerStore(t, r.Addr)
}

// The ledger's contract (package ledgertest), on the memory store and on
// two RedisStores sharing one redis-server; broker/api runs it over gRPC.
func TestLedger(t *testing.T) {
	t.Run("memory", func(t *testing.T) { ledgertest.Run(t, memoryPair) })
	t.Run("redis", func(t *testing.T) { ledgertest.Run(t, redisPair) })
}
