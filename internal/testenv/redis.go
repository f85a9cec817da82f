//go:build linux

package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a running redis-server with no persistence.
type RedisServer struct {
	Addr string // 127.0.0.1:PORT

	bin   string
	port  int
	dir   string
	proc  *process
	extra []string // more arguments (replicaof, sentinel mode)
}

// Redis starts a redis-server for this test alone (it starts in
// milliseconds, so sharing would buy nothing), stopped at cleanup.
func Redis(tb testing.TB) *RedisServer {
	tb.Helper()
	return startRedis(tb)
}

// RedisArgs is Redis with more redis-server arguments (a debugging
// setting such as key-load-delay), kept across Start.
func RedisArgs(tb testing.TB, args ...string) *RedisServer {
	tb.Helper()
	return startRedis(tb, args...)
}

// Start (re)starts the server on its address, for tests of recovery after
// an outage. The data of an earlier run is gone.
func (r *RedisServer) Start() error {
	if r.proc != nil && !r.proc.exited() {
		return nil
	}
	args := append([]string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--daemonize", "no", "--dir", r.dir, "--loglevel", "warning"}, r.extra...)
	p, err := startProcess(r.bin, args, []string{"PATH=" + os.Getenv("PATH")}, r.dir)
	if err != nil {
		return err
	}
	r.proc = p
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited() {
			return p.describe("redis-server")
		}
		if r.ping() == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.Stop()
	return fmt.Errorf("redis-server not ready after 10s; output:\n%s", p.out.String())
}

func (r *RedisServer) ping() error {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}

// Stop stops the server (a simulated outage when followed by Start).
func (r *RedisServer) Stop() {
	if r.proc != nil {
		r.Resume() // a paused server would hold SIGTERM until the grace ran out
		r.proc.stop(5 * time.Second)
	}
}

// Kill ends the server at once (a crashed primary).
func (r *RedisServer) Kill() {
	if r.proc != nil && !r.proc.exited() {
		_ = syscall.Kill(-r.proc.cmd.Process.Pid, syscall.SIGKILL)
		<-r.proc.done
	}
}

// Pause stops the server with SIGSTOP: it keeps its connections and its
// listening socket but answers nothing (a stalled primary), until Resume.
func (r *RedisServer) Pause() {
	if r.proc != nil {
		r.proc.signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused server (SIGCONT); it then works through what
// its clients sent meanwhile.
func (r *RedisServer) Resume() {
	if r.proc != nil {
		r.proc.signal(syscall.SIGCONT)
	}
}

// RedisReplica starts a redis-server replicating the primary at addr
// (host:port; a Relay's address to control the link), stopped at
// cleanup. It may still be syncing when it returns.
func RedisReplica(tb testing.TB, addr string) *RedisServer {
	tb.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("replica of %q: %v", addr, err)
	}
	return startRedis(tb, "--replicaof", host, port)
}

// RedisFailover is a primary, a replica and three Sentinels watching them
// (master name "airlock"): a real failover setup on loopback.
type RedisFailover struct {
	Primary, Replica *RedisServer
	Sentinels        []string // host:port of each Sentinel
	MasterName       string
}

// RedisSentinel starts a primary, a replica of it and three Sentinels
// (quorum 2, down after 500 ms), all stopped at cleanup. Sentinel mode is
// redis-server's own (--sentinel); Debian's redis-sentinel package is the
// same binary.
func RedisSentinel(tb testing.TB) *RedisFailover {
	tb.Helper()
	primary := Redis(tb)
	replica := RedisReplica(tb, primary.Addr)
	f := &RedisFailover{Primary: primary, Replica: replica, MasterName: "airlock"}
	for i := 0; i < 3; i++ {
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor airlock 127.0.0.1 %d 2\nsentinel down-after-milliseconds airlock 500\n"+
			"sentinel failover-timeout airlock 3000\nsentinel parallel-syncs airlock 1\n", port, dir, primary.port)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		p, err := startProcess(primary.bin, []string{conf, "--sentinel"}, []string{"PATH=" + os.Getenv("PATH")}, dir)
		if err != nil {
			tb.Fatalf("start sentinel: %v", err)
		}
		tb.Cleanup(func() { p.stop(5 * time.Second) })
		s := &RedisServer{Addr: loopback(port)}
		deadline := time.Now().Add(10 * time.Second)
		for s.ping() != nil {
			if time.Now().After(deadline) || p.exited() {
				tb.Fatalf("sentinel not ready: %v", p.describe("redis-sentinel"))
			}
			time.Sleep(20 * time.Millisecond)
		}
		f.Sentinels = append(f.Sentinels, s.Addr)
	}
	return f
}

func startRedis(tb testing.TB, extra ...string) *RedisServer {
	tb.Helper()
	bin, ok := findBinary("REDIS_SERVER_BIN", "redis-server", "")
	if !ok {
		missing(tb, "redis-server")
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	r := &RedisServer{Addr: loopback(port), bin: bin, port: port, dir: tb.TempDir(), extra: extra}
	if err := r.Start(); err != nil {
		tb.Fatalf("start redis: %v", err)
	}
	tb.Cleanup(r.Stop)
	return r
}
