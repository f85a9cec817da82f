package plugin_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"google.golang.org/grpc"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

type provider struct {
	pluginv1.UnimplementedPluginServiceServer
}

// A provider's main: Main checks that the host launched it, negotiates the
// protocol version, prints the handshake line and serves until the host
// stops it. (It exits the process, so this example only compiles.)
func ExampleMain() {
	plugin.Main(plugin.ServeConfig{
		Versions: []uint32{1},
		Register: func(s *grpc.Server, rt *plugin.Runtime) {
			pluginv1.RegisterPluginServiceServer(s, &provider{})
		},
	})
}

// Serve with the environment a host sets: the handshake line on stdout
// tells the host the negotiated version and the provider's socket.
func ExampleServe() {
	env := map[string]string{
		plugin.CookieEnv:    plugin.MagicCookie,
		plugin.ProtocolsEnv: "1,2,3", // what the host offers
		// This launch's keys: the digest of the key the host presents on
		// each call, and the key this provider presents to the host.
		plugin.HostKeyDigestEnv: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		plugin.PluginKeyEnv:     "k7Qm2vX9pL4sT8wZ1cR6yB3nH5jF0dG2aE7uK9oI4qM",
	}
	var rt *plugin.Runtime
	var line string
	err := plugin.Serve(plugin.ServeConfig{
		Versions: []uint32{1, 2}, // what this provider speaks
		Getenv:   func(k string) string { return env[k] },
		Register: func(s *grpc.Server, r *plugin.Runtime) {
			pluginv1.RegisterPluginServiceServer(s, &provider{})
			rt = r
		},
		Stdout: writerFunc(func(p []byte) (int, error) {
			line = string(p)
			rt.Stop() // the host would connect here; stop at once instead
			return len(p), nil
		}),
	})
	f := strings.Split(strings.TrimSpace(line), "|")
	fmt.Println("core", f[0], "app", f[1], "over", f[2], f[4], "socket", f[3] == rt.Socket)
	fmt.Println("stopped:", err)
	// Output:
	// core 1 app 2 over unix grpc socket true
	// stopped: <nil>
}

// DialHost's client presents the provider's key on every call, and the
// invocation's key when the call is made with the Invoke's context: make
// HostService calls with stream.Context() (or a context derived from it).
// (It needs a host, so this example only compiles.)
func ExampleDialHost() {
	hs, conn, err := plugin.DialHost()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	invoke := func(r *pluginv1.InvokeRequest, stream pluginv1.PluginService_InvokeServer) error {
		ctx := stream.Context() // carries this invocation's key
		cred, err := hs.RequestCredential(ctx, &pluginv1.RequestCredentialRequest{
			InvocationId: r.GetEnvelope().GetContext().GetInvocationId(), Intent: "tickets.read"})
		if err != nil {
			return err
		}
		_ = plugin.ProxyClient(cred.GetHandle(), cred.GetEgressProxy())
		return stream.Send(&pluginv1.ActionResult{Status: pluginv1.Status_STATUS_FAILED})
	}
	_ = invoke
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Negotiate picks the highest version both sides speak.
func ExampleNegotiate() {
	v, err := plugin.Negotiate([]uint32{1, 2, 3}, []uint32{1, 2})
	fmt.Println(v, err)
	_, err = plugin.Negotiate([]uint32{3}, []uint32{1, 2})
	fmt.Println(errors.Is(err, plugin.ErrNoCommonVersion))
	// Output:
	// 2 <nil>
	// true
}

// ProxyClient sends plain-HTTP requests to the egress proxy in absolute
// form with the handle as the proxy user name; the proxy adds TLS and the
// secret. Here a stand-in proxy shows what it receives.
func ExampleProxyClient() {
	egress := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The proxy reads the handle the way a server reads basic auth.
		user, _, _ := (&http.Request{Header: http.Header{"Authorization": r.Header["Proxy-Authorization"]}}).BasicAuth()
		fmt.Fprintf(w, "%s %s handle=%s", r.Method, r.URL, user)
	}))
	defer egress.Close()
	u, _ := url.Parse(egress.URL)

	c := plugin.ProxyClient("alh_example-handle", u.Host) // from RequestCredential
	resp, err := c.Get("http://api.example.com/v1/tickets")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// GET http://api.example.com/v1/tickets handle=alh_example-handle
}
