//go:build linux

package testenv_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The harness starts a real Vault: write and read a KV v2 secret.
func TestVaultKV2RoundTrip(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	kv := v.Client(t).KVv2("secret")
	if _, err := kv.Put(ctx, "harness/check", map[string]any{"api_key": "v1-value"}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := kv.Put(ctx, "harness/check", map[string]any{"api_key": "v2-value"}); err != nil {
		t.Fatalf("put v2: %v", err)
	}
	s, err := kv.Get(ctx, "harness/check")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if s.Data["api_key"] != "v2-value" || s.VersionMetadata.Version != 2 {
		t.Fatalf("read back %v version %d", s.Data["api_key"], s.VersionMetadata.Version)
	}
	old, err := kv.GetVersion(ctx, "harness/check", 1)
	if err != nil || old.Data["api_key"] != "v1-value" {
		t.Fatalf("version 1: %v %v", old, err)
	}
}

// A dedicated Vault can be sealed and unsealed (for outage tests).
func TestVaultSealUnseal(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	kv := v.Client(t).KVv2("secret")
	if _, err := kv.Put(ctx, "x", map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	v.Seal(t)
	if _, err := kv.Get(ctx, "x"); err == nil {
		t.Fatal("read from a sealed Vault succeeded")
	}
	v.Unseal(t)
	if _, err := kv.Get(ctx, "x"); err != nil {
		t.Fatalf("read after unseal: %v", err)
	}
}

// The harness starts a real redis-server: set and get a key, then stop and
// restart it.
func TestRedisRoundTrip(t *testing.T) {
	r := testenv.Redis(t)
	if got := redisCmd(t, r.Addr, "SET", "airlock:harness", "ok"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	if got := redisCmd(t, r.Addr, "GET", "airlock:harness"); got != "$2 ok" {
		t.Fatalf("GET = %q", got)
	}
	r.Stop()
	if _, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
		t.Fatal("redis still accepts connections after Stop")
	}
	if err := r.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if got := redisCmd(t, r.Addr, "GET", "airlock:harness"); got != "$-1" {
		t.Fatalf("GET after restart = %q, want nil (no persistence)", got)
	}
}

// redisCmd sends one command in RESP and returns the reply's lines joined.
func redisCmd(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "$") && line != "$-1" {
		body, _ := rd.ReadString('\n')
		return line + " " + strings.TrimRight(body, "\r\n")
	}
	return line
}
