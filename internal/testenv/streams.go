//go:build linux

package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The streaming upstreams of the proxy tests: a gRPC service and a
// WebSocket server, both over TLS, both checking for the secret the
// proxy should have injected and echoing it on request.

// StartGRPCUpstream serves the test gRPC service over TLS with cert on
// a loopback port it returns. The service speaks raw bytes (no protobuf
// schema), so Go and Python clients need no generated code. Its methods:
//
//	/t.T/Unary         one message back: "unary:<msg>:<authed>"; "echo"
//	                   answers the authorization metadata (and puts it
//	                   in a trailer); "fail" answers NOT_FOUND
//	/t.T/ServerStream  three messages "s0".."s2"; "slow" sends "s0" and
//	                   then waits for the call to end
//	/t.T/ClientStream  one message back: "client:<msgs joined>:<authed>"
//	/t.T/Bidi          "bidi:<msg>" for each message; "echo" answers the
//	                   authorization metadata
//
// <authed> is whether the authorization metadata was "Bearer <secret>".
// Every call ends with the trailer x-upstream: done.

// RawCodec passes gRPC messages through as bytes (*[]byte).
type RawCodec struct{}

func (RawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("RawCodec: not *[]byte")
}

func (RawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("RawCodec: not *[]byte")
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (RawCodec) Name() string { return "proto" }

func StartGRPCUpstream(t testing.TB, cert tls.Certificate, secret string) int {
	t.Helper()
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.ForceServerCodec(RawCodec{}), grpc.UnknownServiceHandler(grpcTestService(secret)))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port
}

func grpcTestService(secret string) grpc.StreamHandler {
	return func(_ any, st grpc.ServerStream) error { return serveGRPCTestCall(st, secret) }
}

func serveGRPCTestCall(st grpc.ServerStream, secret string) error {
	method, _ := grpc.MethodFromServerStream(st)
	md, _ := metadata.FromIncomingContext(st.Context())
	auth := strings.Join(md.Get("authorization"), ",")
	authed := fmt.Sprint(auth == "Bearer "+secret)
	defer st.SetTrailer(metadata.Pairs("x-upstream", "done"))
	send := func(s string) error { b := []byte(s); return st.SendMsg(&b) }
	var m []byte
	switch method {
	case "/t.T/Unary":
		if err := st.RecvMsg(&m); err != nil {
			return err
		}
		switch string(m) {
		case "echo":
			st.SetTrailer(metadata.Pairs("x-echo", auth))
			return send(auth)
		case "fail":
			return status.Error(5, "no such thing") // NOT_FOUND
		}
		return send("unary:" + string(m) + ":" + authed)
	case "/t.T/ServerStream":
		if err := st.RecvMsg(&m); err != nil {
			return err
		}
		if string(m) == "slow" {
			if err := send("s0"); err != nil {
				return err
			}
			<-st.Context().Done()
			return st.Context().Err()
		}
		for i := range 3 {
			if err := send(fmt.Sprintf("s%d", i)); err != nil {
				return err
			}
		}
		return nil
	case "/t.T/ClientStream":
		var got []string
		for {
			if err := st.RecvMsg(&m); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			got = append(got, string(m))
		}
		return send("client:" + strings.Join(got, ",") + ":" + authed)
	case "/t.T/Bidi":
		for {
			if err := st.RecvMsg(&m); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			reply := "bidi:" + string(m)
			if string(m) == "echo" {
				reply = auth
			}
			if err := send(reply); err != nil {
				return err
			}
		}
	}
	return status.Error(12, "unknown method") // UNIMPLEMENTED
}

// WSUpstream is the test WebSocket server, over TLS on a loopback port.
// It accepts subprotocol "chat.v1" and answers each text message:
//
//	"auth"        the handshake's Authorization header (an echo)
//	"split"       the secret, as one message of two frames
//	"split-msgs"  the secret's halves as two messages
//	"hold"        nothing
//	anything else "echo:<msg>"; binary messages come back as they are
type WSUpstream struct {
	Port   int
	secret string
	mu     sync.Mutex
	auth   []string // the Authorization of each handshake
}

// StartWSUpstream starts the server with cert; secret is what "split"
// and "split-msgs" send.
func StartWSUpstream(t testing.TB, cert tls.Certificate, secret string) *WSUpstream {
	t.Helper()
	u := &WSUpstream{secret: secret}
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		Handler: http.HandlerFunc(u.serve)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Port = l.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *WSUpstream) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	u.mu.Lock()
	u.auth = append(u.auth, auth)
	u.mu.Unlock()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"chat.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := context.Background()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			_ = c.Write(ctx, typ, msg)
			continue
		}
		half := len(u.secret) / 2
		switch string(msg) {
		case "auth":
			err = c.Write(ctx, typ, []byte(auth))
		case "split":
			var mw interface {
				Write([]byte) (int, error)
				Close() error
			}
			if mw, err = c.Writer(ctx, typ); err == nil {
				_, _ = mw.Write([]byte("x:" + u.secret[:half]))
				_, _ = mw.Write([]byte(u.secret[half:] + ":y"))
				err = mw.Close()
			}
		case "split-msgs":
			if err = c.Write(ctx, typ, []byte("x:"+u.secret[:half])); err == nil {
				err = c.Write(ctx, typ, []byte(u.secret[half:]+":y"))
			}
		case "hold":
		default:
			err = c.Write(ctx, typ, append([]byte("echo:"), msg...))
		}
		if err != nil {
			return
		}
	}
}

// Handshakes is how many handshakes the server has seen.
func (u *WSUpstream) Handshakes() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.auth)
}

// LastAuth is the Authorization header of the last handshake.
func (u *WSUpstream) LastAuth(t testing.TB) string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.auth) == 0 {
		t.Fatal("the WebSocket upstream saw no handshake")
	}
	return u.auth[len(u.auth)-1]
}
