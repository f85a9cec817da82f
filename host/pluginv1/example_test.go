package pluginv1_test

import (
	"fmt"

	"github.com/airlock-dev/airlock/host/pluginv1"
)

// The host reads a provider's handshake line and checks every field before
// it dials the socket the line names.
func ExampleParseHandshakeLine() {
	l, err := pluginv1.ParseHandshakeLine("1|1|unix|/run/provider/p.sock|grpc")
	fmt.Println(l.AppVersion, l.Socket, err)
	_, err = pluginv1.ParseHandshakeLine("1|1|tcp|127.0.0.1:1234|grpc")
	fmt.Println(err)
	// Output:
	// 1 /run/provider/p.sock <nil>
	// handshake line: network-type: must be unix
}
