package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/internal/testenv"
)

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
		grpc.WithDefaultCallOptions(grpc.ForceCodec(testenv.RawCodec{})))
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
	case "handle":
		// The plugin's own handle (from the proxy URL) in a message.
		u, _ := url.Parse(os.Getenv("HTTPS_PROXY"))
		m := "key=" + u.User.Username()
		call("unary-handle", "/t.T/Unary", []string{m}, false, false)
		call("bidi-handle", "/t.T/Bidi", []string{"x", m}, true, true)
		call("after", "/t.T/Unary", []string{"hi"}, false, false)
	case "echo-bin":
		call("echo-bin", "/t.T/Unary", []string{"echo-bin"}, false, false)
	case "slow":
		call("slow", "/t.T/ServerStream", []string{"slow"}, true, false)
		call("after", "/t.T/Unary", []string{"hi"}, false, false)
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario")
		return 1
	}
	return 0
}
