package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// `airlock plugins` and `airlock handle inspect` run as a user the
// socket does not admit say so and name the users it admits, instead of
// "connection reset by peer" or gRPC's "error reading server preface".
func TestPeerRefusalNamesAdmittedUsers(t *testing.T) {
	other := os.Getuid() + 4242
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args func(sock string) []string
	}{
		{"control API", func(sock string) []string {
			return []string{"plugins", "--control", "unix:" + sock, "--control-token-file", token}
		}},
		{"broker API", func(sock string) []string {
			return []string{"handle", "inspect", "--broker", sock, "--broker-token-file", token, "1a544963eb379d61"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "run", "s.sock")
			l, err := peerauth.ListenUnix(sock, peerauth.UnixOptions{Name: c.name + " socket", AllowedUIDs: []int{other}, GID: peerauth.NoGroup})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					conn.Close()
				}
			}()
			defer func() { l.Close(); <-done }()
			_, stderr, code := cli(t, nil, "", c.args(sock)...)
			want := fmt.Sprintf("refused this user: the %s socket admits uid %d", c.name, other)
			if code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, fmt.Sprintf("came from uid %d", os.Getuid())) {
				t.Fatalf("exit %d, stderr %q; want %q", code, stderr, want)
			}
		})
	}
}
