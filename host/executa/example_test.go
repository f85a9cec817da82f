package executa_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/host/executa"
)

// The host reads a plugin's stdout frame by frame: one JSON-RPC 2.0
// message per line, each checked before it is dispatched.
func ExampleFrameReader() {
	stdout := strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` + "\n" +
		`{"jsonrpc":"2.0","method":"progress","params":{"invoke_id":"inv-1","percent":50}}` + "\n")
	fr := executa.NewFrameReader(stdout)
	for {
		m, err := fr.Next()
		if err != nil {
			fmt.Println("end:", err)
			break
		}
		fmt.Printf("response: %t method: %q\n", m.IsResponse(), m.Method)
	}
	// The host's answer to a plugin's reverse call is one frame too.
	_ = executa.Encode(os.Stdout, &executa.Message{JSONRPC: "2.0", ID: []byte("7"),
		Error: &executa.RPCError{Code: executa.CodeSamplingNotGranted, Message: "sampling not granted"}})
	// Output:
	// response: true method: ""
	// response: false method: "progress"
	// end: EOF
	// {"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"sampling not granted"}}
}

// A describe result is checked as a whole, and every problem is named by
// the manifest's own keys.
func ExampleParseManifest() {
	m, err := executa.ParseManifest([]byte(`{"version":"0.1.0","host_capabilities":["llm.sample"],
	  "tools":[{"name":"summarize","timeout":30,"parameters":[{"name":"text","type":"string"}]}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	t, _ := m.Tool("summarize")
	fmt.Println(t.Name, t.Timeout, m.Has(executa.CapSample))
	_, err = executa.ParseManifest([]byte(`{"version":"one","tools":[]}`))
	fmt.Println(err)
	// Output:
	// summarize 30 true
	// version: must be SemVer
	// tools: at least one tool is required
}
