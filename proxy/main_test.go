package proxy

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestMain runs the tests, then fails the package if any goroutine is
// left over: every server, connection and background loop the tests
// started must have ended with them.
//
// The Go client of TestRealClients runs as a subprocess (this test
// binary, re-executed), so that net/http reads HTTP_PROXY from a fresh
// environment exactly as a plugin's would.
func TestMain(m *testing.M) {
	if target := os.Getenv("AIRLOCK_TEST_GRPC_TARGET"); target != "" {
		os.Exit(grpcClientMain(target))
	}
	if u := os.Getenv("AIRLOCK_TEST_GO_CLIENT_URL"); u != "" {
		resp, err := http.Get(u) // DefaultTransport: Proxy = ProxyFromEnvironment
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d\n%s", resp.StatusCode, body)
		os.Exit(0)
	}
	os.Exit(testenv.MainNoLeaks(m))
}
