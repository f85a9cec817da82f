package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
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
func runFloor(dir, upstream string) {
	cfg := &tls.Config{RootCAs: loadRoots(dir), ServerName: benchHost, NextProtos: []string{"http/1.1"}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(l.Addr().String())
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go floorConn(c, upstream, cfg)
	}
}

func floorConn(c net.Conn, upstream string, cfg *tls.Config) {
	defer c.Close()
	raw, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	tc := tls.Client(raw, cfg)
	defer tc.Close()
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
