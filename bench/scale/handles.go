package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/broker"
)

// perInvocation handles share an invocation, and invocations are spread
// over plugins, as a busy host's would be.
const (
	perInvocation = 8
	plugins       = 100
	wideHandles   = 10_000 // the plugin whose revocation is timed
	samples       = 2000   // timed issues and resolves per cell
)

var benchDest = []broker.Destination{{Host: "api.example.test", Port: 443}}

// benchHandles fills a fresh store of each kind with n live handles and
// measures, at that size: issue and resolve latency (one caller, so the
// store's cost and not the machine's parallelism), memory per handle (the
// Go heap for the memory store, Redis' used_memory for Redis) and the
// revocation of one plugin holding 10k of them.
func benchHandles(ns []int, redisServer string) {
	fmt.Println("\n| store | live handles | fill (handles/s) | issue p50 µs | issue p99 µs | resolve p50 µs | resolve p99 µs | bytes per handle | revoke a plugin with 10k handles |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, n := range ns {
		measureStore("memory", n, func() (broker.Store, func() int64, func()) {
			s := broker.NewMemoryStore(n+wideHandles+2*samples+1000, time.Minute, time.Hour, nil)
			return s, goHeap, func() {}
		})
	}
	if redisServer == "" {
		return
	}
	addr, stop := startRedis(redisServer)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, n := range ns {
		measureStore("redis", n, func() (broker.Store, func() int64, func()) {
			check(rdb.FlushAll(context.Background()).Err())
			// No local grant cache: the curve is the store's, not the
			// replica's memory.
			rs, err := broker.NewRedisStore(broker.RedisConfig{Address: addr, LocalCache: -1}, time.Minute, time.Hour)
			check(err)
			return rs, func() int64 { return redisUsed(rdb) }, func() { _ = rs.Close() }
		})
	}
}

func measureStore(kind string, n int, open func() (broker.Store, func() int64, func())) {
	ctx := context.Background()
	store, used, closeStore := open()
	defer closeStore()
	secrets := filepath.Join(os.TempDir(), "airlock-scale-secrets.yaml")
	check(os.WriteFile(secrets, []byte("bench/api: {token: scale}\n"), 0o600))
	defer os.Remove(secrets)
	bc := broker.Config{Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{"bench": {
		Class: broker.ClassRead, Secret: broker.SecretRef{Source: broker.SourceFile, Path: "bench/api", Field: "token"},
		Inject: broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}}}}.WithDefaults()
	check(bc.Validate())
	cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}}, time.Minute, 0, nil, nil)
	b := broker.New(bc, store, cache, broker.Options{})
	issue := func(plugin, inv string) string {
		iss, err := b.Issue(ctx, broker.IssueRequest{PluginID: plugin, InvocationID: inv, Intent: "bench",
			Destinations: benchDest, Deadline: time.Now().Add(time.Hour)})
		check(err)
		return iss.Handle
	}

	before := used()
	keep := make([]string, 0, samples) // every (n/samples)th handle, resolved below
	var mu sync.Mutex
	var next atomic.Int64
	workers := 2
	if kind == "redis" {
		workers = 32
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				inv := i / perInvocation
				h := issue("p"+strconv.Itoa(inv%plugins), "inv-"+strconv.Itoa(inv))
				if i%max(n/samples, 1) == 0 {
					mu.Lock()
					keep = append(keep, h)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	fill := float64(n) / time.Since(start).Seconds()
	perHandle := float64(used()-before) / float64(n)

	lat := make([]time.Duration, 0, samples)
	for i := range samples {
		t0 := time.Now()
		issue("timed", "timed-"+strconv.Itoa(i/perInvocation))
		lat = append(lat, time.Since(t0))
	}
	i50, i99 := quantiles(lat)
	lat = lat[:0]
	for _, h := range keep {
		t0 := time.Now()
		_, err := b.Resolve(ctx, h)
		lat = append(lat, time.Since(t0))
		check(err)
	}
	r50, r99 := quantiles(lat)

	for i := range wideHandles {
		issue("wide", "wide-"+strconv.Itoa(i/perInvocation))
	}
	t0 := time.Now()
	revoked, err := b.RevokePlugin(ctx, "wide")
	took := time.Since(t0)
	check(err)
	if revoked != wideHandles {
		check(fmt.Errorf("revoked %d of %d handles", revoked, wideHandles))
	}
	fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %s | %.0f | %s |\n", kind, n, fill, us(i50), us(i99), us(r50), us(r99),
		perHandle, took.Round(100*time.Microsecond))
}

func goHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func redisUsed(rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	check(err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			check(err)
			return n
		}
	}
	check(fmt.Errorf("INFO memory has no used_memory"))
	return 0
}

func startRedis(bin string) (string, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	check(cmd.Start())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			check(fmt.Errorf("redis-server did not listen: %v", err))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}
