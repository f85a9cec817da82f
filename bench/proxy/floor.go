package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// runFloor is not a proxy: it is the least work any proxy that
// re-originates requests over TLS must do, measured on the same machine.
// Per client connection it opens one TLS connection to the upstream, and
// per request it copies the head (dropping Proxy-* lines, turning the
// absolute-form target into origin-form), sends it, reads a
// Content-Length response and writes it back. No checks, no header
// parsing beyond that, no allocation per request; GET only. Its CPU per
// request is the system-call and scheduling floor Airlock's own work sits
// on.
func runFloor(dir, upstream string) { serveForwarder(dir, upstream, floorConn) }

// serveForwarder prints the address it listens on and serves each
// client connection with conn, on a TLS connection of its own to the
// upstream (verified with the bench CA).
func serveForwarder(dir, upstream string, conn func(c net.Conn, tc *tls.Conn)) {
	cfg := &tls.Config{RootCAs: loadRoots(dir), ServerName: benchHost, NextProtos: []string{"http/1.1"}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(l.Addr().String())
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			raw, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			tc := tls.Client(raw, cfg)
			defer tc.Close()
			conn(c, tc)
		}()
	}
}

func floorConn(c net.Conn, tc *tls.Conn) {
	br, ubr := bufio.NewReaderSize(c, 4<<10), bufio.NewReaderSize(tc, 16<<10)
	buf := make([]byte, 0, 4<<10)
	for {
		buf = buf[:0]
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		method, target, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			return
		}
		if _, rest, ok := bytes.Cut(target, []byte("://")); ok {
			target = rest[bytes.IndexByte(rest, '/'):]
		}
		buf = append(append(append(buf, method...), ' '), target...)
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if !bytes.HasPrefix(h, []byte("Proxy-")) {
				buf = append(buf, h...)
			}
			if len(h) <= 2 {
				break
			}
		}
		if _, err := tc.Write(buf); err != nil {
			return
		}
		buf, n := buf[:0], 0
		for {
			h, err := ubr.ReadSlice('\n')
			if err != nil {
				return
			}
			if v, ok := bytes.CutPrefix(h, []byte("Content-Length: ")); ok {
				n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
			buf = append(buf, h...)
			if len(h) <= 2 {
				break
			}
		}
		head := len(buf)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(ubr, buf[head:]); err != nil {
			return
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// runParsingFloor is the floor plus what any Go proxy that reads HTTP
// with the standard library does at the least: each request head is
// parsed by http.ReadRequest, written upstream in origin form from the
// parsed request, and the response head is parsed by http.ReadResponse
// and written back from the parsed response. Still no checks, no
// injection, no audit, no echo guard. The gap between it and the floor is
// what parsing and writing two heads costs in Go; the gap between
// Airlock and it is Airlock's own work.
func runParsingFloor(dir, upstream string) { serveForwarder(dir, upstream, parsingFloorConn) }

func parsingFloorConn(c net.Conn, tc *tls.Conn) {
	br, ubr := bufio.NewReaderSize(c, 4<<10), bufio.NewReaderSize(tc, 16<<10)
	bw, ubw := bufio.NewWriterSize(c, 4<<10), bufio.NewWriterSize(tc, 4<<10)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		ubw.WriteString(req.Method + " " + req.URL.RequestURI() + " HTTP/1.1\r\nHost: " + req.Host + "\r\n")
		for k, vv := range req.Header {
			if strings.HasPrefix(k, "Proxy-") {
				continue
			}
			for _, v := range vv {
				ubw.WriteString(k + ": " + v + "\r\n")
			}
		}
		ubw.WriteString("\r\n")
		if ubw.Flush() != nil {
			return
		}
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			return
		}
		bw.WriteString(resp.Proto + " " + resp.Status + "\r\n")
		for k, vv := range resp.Header {
			for _, v := range vv {
				bw.WriteString(k + ": " + v + "\r\n")
			}
		}
		bw.WriteString("\r\n")
		_, err = io.Copy(bw, resp.Body)
		resp.Body.Close()
		if err != nil || bw.Flush() != nil {
			return
		}
	}
}
