package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The gRPC upstream of the tests speaks raw bytes (no protobuf schema),
// so the Go and the Python client need no generated code. Its methods:
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
// <authed> is whether the authorization metadata held the test secret.
// Every call ends with the trailer x-upstream: done.

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("rawCodec: not *[]byte")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: not *[]byte")
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// startGRPCUpstream serves the test service over TLS with a certificate
// for api.example.com from ca, on a loopback port it returns.
func startGRPCUpstream(t testing.TB, ca *testenv.CA) int {
	t.Helper()
	cert := ca.Issue(t, "api.example.com")
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(grpcTestService))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port
}

func grpcTestService(_ any, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	md, _ := metadata.FromIncomingContext(st.Context())
	auth := strings.Join(md.Get("authorization"), ",")
	authed := fmt.Sprint(auth == "Bearer "+testSecret)
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

// grpcResult is one call's outcome as a client subprocess prints it.
type grpcResult struct {
	Call    string            `json:"call"`
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Replies []string          `json:"replies"`
	Trailer map[string]string `json:"trailer"`
}

// grpcClientMain is the Go gRPC client the tests run as a subprocess
// (this test binary re-executed), so that grpc-go reads HTTPS_PROXY and
// SSL_CERT_FILE from a fresh environment as a plugin's would. It calls
// target with the scenario AIRLOCK_TEST_GRPC_SCENARIO names and prints
// one JSON grpcResult per line, each as soon as it is known.
func grpcClientMain(target string) int {
	conn, err := grpc.NewClient("dns:///"+target, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{})),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	ctx := context.Background()
	if auth := os.Getenv("AIRLOCK_TEST_GRPC_AUTH"); auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	out := json.NewEncoder(os.Stdout)
	call := func(name, method string, msgs []string, server, client bool) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r := grpcResult{Call: name, Trailer: map[string]string{}}
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: server, ClientStreams: client}, method)
		if err == nil {
			for _, m := range msgs {
				b := []byte(m)
				if err = st.SendMsg(&b); err != nil {
					break
				}
				if client && server {
					var rb []byte
					if err = st.RecvMsg(&rb); err != nil {
						break
					}
					r.Replies = append(r.Replies, string(rb))
				}
			}
			if err == nil || err == io.EOF {
				err = st.CloseSend()
			}
			for err == nil {
				var rb []byte
				if err = st.RecvMsg(&rb); err == nil {
					r.Replies = append(r.Replies, string(rb))
					if name == "slow" {
						_ = out.Encode(grpcResult{Call: "slow-started"})
					}
				}
			}
			for k, v := range st.Trailer() {
				r.Trailer[k] = strings.Join(v, ",")
			}
		}
		if err != io.EOF {
			s := status.Convert(err)
			r.Code, r.Message = int(s.Code()), s.Message()
		}
		_ = out.Encode(r)
	}
	switch os.Getenv("AIRLOCK_TEST_GRPC_SCENARIO") {
	case "all":
		call("unary", "/t.T/Unary", []string{"hi"}, false, false)
		call("server", "/t.T/ServerStream", []string{"go"}, true, false)
		call("client", "/t.T/ClientStream", []string{"a", "b", "c"}, false, true)
		call("bidi", "/t.T/Bidi", []string{"x", "docs", "echo"}, true, true)
		call("echo", "/t.T/Unary", []string{"echo"}, false, false)
		call("fail", "/t.T/Unary", []string{"fail"}, false, false)
	case "unary":
		call("unary", "/t.T/Unary", []string{"hi"}, false, false)
	case "slow":
		call("slow", "/t.T/ServerStream", []string{"slow"}, true, false)
		call("after", "/t.T/Unary", []string{"hi"}, false, false)
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario")
		return 1
	}
	return 0
}
