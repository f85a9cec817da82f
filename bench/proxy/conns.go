package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// connSamples is how many requests (or messages) are timed per cell, each
// on an open connection picked at random.
const connSamples = 2000

// benchConns measures the serve binary with many connections open at
// once: for each count, a fresh `airlock serve`, that many CONNECT
// tunnels (intercepted, each with one exchange done so its upstream
// connection is open) or WebSockets (through the plain path, one echo
// done), then its RSS per connection and the latency of a request or a
// message on one of them picked at random. It prints one Markdown table.
func benchConns(ns []int, bin, dir, upstream string, upPort string, roots *x509.CertPool) {
	files := raiseFileLimit()
	fmt.Println("\n| connections | kind | serve RSS before MiB | RSS per connection KiB | p50 ms | p99 ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, kind := range []string{"tunnel", "websocket"} {
		for _, n := range ns {
			// A WebSocket holds two descriptors in the serve binary (the
			// client's and the upstream's) and two here; a tunnel's
			// upstream connection goes back to the pool.
			if kind == "websocket" && uint64(2*n+1024) > files {
				fmt.Printf("| %d | %s | skipped: needs %d open files, the limit here is %d | | | |\n", n, kind, 2*n+1024, files)
				continue
			}
			sp := startServeBinary(bin, dir, upstream)
			proxyURL := &url.URL{Scheme: "http", Host: sp.addr, User: url.User(sp.handle)}
			base := rss(sp.cmd.Process.Pid)
			var one func(i int) time.Duration
			var closeAll func()
			if kind == "tunnel" {
				one, closeAll = openTunnels(n, sp, upPort, roots)
			} else {
				one, closeAll = openWebSockets(n, proxyURL, upPort)
			}
			per := float64(rss(sp.cmd.Process.Pid)-base) / float64(n)
			lat := make([]time.Duration, 0, connSamples)
			for range connSamples {
				lat = append(lat, one(rand.IntN(n)))
			}
			slices.Sort(lat)
			fmt.Printf("| %d | %s | %.1f | %.1f | %.3f | %.3f |\n", n, kind, float64(base)/(1<<20), per/1024,
				ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]))
			closeAll()
			_ = sp.cmd.Process.Kill()
			_ = sp.cmd.Wait()
		}
	}
}

// raiseFileLimit lifts this process's open-file limit (and so the serve
// binary's and the upstream's, which inherit it) as far as it may go, and
// returns it: a WebSocket costs the proxy two descriptors.
func raiseFileLimit() (limit uint64) {
	var l syscall.Rlimit
	check(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	want := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return want.Cur
	}
	l.Cur = l.Max
	check(syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l))
	return l.Cur
}

// rss is a process's resident set in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			check(err)
			return kb << 10
		}
	}
	check(fmt.Errorf("no VmRSS for pid %d", pid))
	return 0
}

// inParallel runs f(i) for i < n on a few goroutines.
func inParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

type tunnel struct {
	c  *tls.Conn
	br *bufio.Reader
}

// openTunnels opens n intercepted CONNECT tunnels through the serve
// binary, each with one GET done.
func openTunnels(n int, sp serveProc, upPort string, roots *x509.CertPool) (func(int) time.Duration, func()) {
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(sp.handle+":"))
	target := benchHost + ":" + upPort
	get := []byte("GET / HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	exchange := func(t *tunnel) {
		_, err := t.c.Write(get)
		check(err)
		resp, err := http.ReadResponse(t.br, nil)
		check(err)
		_, err = io.Copy(io.Discard, resp.Body)
		check(err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			check(fmt.Errorf("tunnel request: status %d", resp.StatusCode))
		}
	}
	tunnels := make([]*tunnel, n)
	inParallel(n, func(i int) {
		raw, err := net.Dial("tcp", sp.addr)
		check(err)
		_, err = fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, auth)
		check(err)
		br := bufio.NewReader(raw)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		check(err)
		if resp.StatusCode != http.StatusOK {
			check(fmt.Errorf("CONNECT: status %d", resp.StatusCode))
		}
		c := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: benchHost, NextProtos: []string{"http/1.1"}})
		check(c.Handshake())
		t := &tunnel{c: c, br: bufio.NewReader(c)}
		exchange(t)
		tunnels[i] = t
	})
	one := func(i int) time.Duration {
		t0 := time.Now()
		exchange(tunnels[i])
		return time.Since(t0)
	}
	return one, func() {
		for _, t := range tunnels {
			t.c.Close()
		}
	}
}

// openWebSockets opens n WebSockets to the upstream's echo through the
// serve binary's plain path, each with one message echoed.
func openWebSockets(n int, proxyURL *url.URL, upPort string) (func(int) time.Duration, func()) {
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	u := "ws://" + benchHost + ":" + upPort + "/ws"
	msg := []byte("ping")
	echo := func(c *websocket.Conn) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		check(c.Write(ctx, websocket.MessageText, msg))
		_, got, err := c.Read(ctx)
		check(err)
		if string(got) != string(msg) {
			check(fmt.Errorf("websocket echo: got %d bytes", len(got)))
		}
	}
	conns := make([]*websocket.Conn, n)
	inParallel(n, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: client})
		check(err)
		echo(c)
		conns[i] = c
	})
	one := func(i int) time.Duration {
		t0 := time.Now()
		echo(conns[i])
		return time.Since(t0)
	}
	return one, func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	}
}

// echoWebSocket is the upstream's WebSocket: every message comes back.
func echoWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	for {
		typ, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		if c.Write(context.Background(), typ, b) != nil {
			return
		}
	}
}
