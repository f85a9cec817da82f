package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// RedisServer is a running redis-server with no persistence.
type RedisServer struct {
	Addr string // 127.0.0.1:PORT

	bin  string
	port int
	dir  string
	proc *process
}

// Redis starts a redis-server for this test alone (it starts in
// milliseconds, so sharing would buy nothing), stopped at cleanup.
func Redis(tb testing.TB) *RedisServer {
	tb.Helper()
	bin, ok := findBinary("REDIS_SERVER_BIN", "redis-server", "")
	if !ok {
		missing(tb, "redis-server")
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	r := &RedisServer{Addr: loopback(port), bin: bin, port: port, dir: tb.TempDir()}
	if err := r.Start(); err != nil {
		tb.Fatalf("start redis: %v", err)
	}
	tb.Cleanup(r.Stop)
	return r
}

// Start (re)starts the server on its address, for tests of recovery after
// an outage. The data of an earlier run is gone.
func (r *RedisServer) Start() error {
	if r.proc != nil && !r.proc.exited() {
		return nil
	}
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--daemonize", "no", "--dir", r.dir, "--loglevel", "warning"}
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
		r.proc.stop(5 * time.Second)
	}
}
