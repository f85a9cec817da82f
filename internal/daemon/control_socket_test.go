package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A control socket in a directory others may write to could be another
// user's stand-in, who would receive the control token: the client does
// not connect.
func TestControlClientRefusesASocketOthersCouldPlant(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "control.sock")
	impostor, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	tok := filepath.Join(t.TempDir(), "control.token")
	if err := os.WriteFile(tok, []byte("a-token-the-impostor-must-not-get-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, base := ControlClient("unix:"+socket, ControlClientOptions{TokenFile: tok})
	c.Timeout = 5 * time.Second // the impostor never answers
	resp, err := c.Get(base + "/v1/plugins")
	if err == nil {
		resp.Body.Close()
		t.Fatal("called a control socket in a directory anyone may write to")
	}
	if !strings.Contains(err.Error(), "not connecting") {
		t.Fatalf("err = %v", err)
	}
}
