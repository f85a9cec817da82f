package api

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A broker socket in a directory others may write to could be another
// user's stand-in, who would receive the token: Dial refuses it.
func TestDialRefusesASocketOthersCouldPlant(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "broker.sock")
	impostor, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	c, err := Dial("unix://"+socket, DialOptions{TokenFile: filepath.Join(t.TempDir(), "broker.token")})
	if err == nil {
		c.Close()
		t.Fatal("dialled a broker socket in a directory anyone may write to")
	}
	if !strings.Contains(err.Error(), "not connecting") {
		t.Fatalf("err = %v", err)
	}
}
