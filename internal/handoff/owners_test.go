package handoff

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// otherHostEnv makes the test binary, re-executed, play a second airlock
// host: it hands a listener over for a plugin and prints the result.
const otherHostEnv = "AIRLOCK_HANDOFF_OTHER_HOST"

func TestMain(m *testing.M) {
	if v := os.Getenv(otherHostEnv); v != "" {
		socket, rest, _ := strings.Cut(v, "\n")
		token, plugin, _ := strings.Cut(rest, "\n")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			var c interface{ Close() error }
			if c, err = Give(socket, token, plugin, l); err == nil {
				c.Close()
			}
		}
		fmt.Println("result:", err)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// The proxy knows a plugin by its name alone: while one host's plugin is
// served, another host (another process) handing over a plugin of the
// same name is refused name_taken, instead of the two sharing handles;
// once the first hand-over ends, the name is free.
func TestPluginNameTakenByAnotherHost(t *testing.T) {
	socket, token, ended := startServe(t)
	otherHost := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), otherHostEnv+"="+socket+"\n"+token+"\nexample.tickets")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the other host: %v", err)
		}
		return string(out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Give(socket, token, "example.tickets", l)
	if err != nil {
		t.Fatal(err)
	}
	if out := otherHost(); !strings.Contains(out, "name_taken") {
		t.Fatalf("another host handing over the same plugin name: %q, want name_taken", out)
	}
	// The same host may hand over another listener of the plugin (a
	// restart of the plugin overlapping its end).
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Give(socket, token, "example.tickets", l2)
	if err != nil {
		t.Fatalf("the same host, a second listener: %v", err)
	}
	c.Close()
	c2.Close()
	<-ended
	<-ended
	if out := otherHost(); !strings.Contains(out, "result: <nil>") {
		t.Fatalf("after the first host's hand-overs ended: %q", out)
	}
}
