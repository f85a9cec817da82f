//go:build linux

package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// VaultServer is a running `vault server -dev`: in memory, unsealed, with
// KV v2 mounted at secret/.
type VaultServer struct {
	Addr      string // http://127.0.0.1:PORT
	RootToken string
	Bin       string // the vault binary, which is also the CLI

	unsealKey string
	proc      *process
	home      string // the server's HOME, removed when it stops
}

var shared struct {
	once  sync.Once
	vault *VaultServer
	err   error
}

// Vault returns the Vault dev server shared by the test package, starting
// it on first use. Tests must not seal or stop it; use NewVault for that,
// and distinct secret paths to stay independent.
func Vault(tb testing.TB) *VaultServer {
	tb.Helper()
	bin, ok := vaultBinary()
	if !ok {
		missing(tb, "vault")
	}
	shared.once.Do(func() { shared.vault, shared.err = startVault(bin) })
	if shared.err != nil {
		tb.Fatalf("start shared Vault: %v", shared.err)
	}
	return shared.vault
}

// NewVault starts a Vault dev server for this test alone, stopped at cleanup.
func NewVault(tb testing.TB) *VaultServer {
	tb.Helper()
	bin, ok := vaultBinary()
	if !ok {
		missing(tb, "vault")
	}
	v, err := startVault(bin)
	if err != nil {
		tb.Fatalf("start Vault: %v", err)
	}
	tb.Cleanup(v.Stop)
	return v
}

// Main runs the package's tests and then stops the shared servers. Call it
// from TestMain: os.Exit(testenv.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.vault != nil {
		shared.vault.Stop()
	}
	if sharedRabbit.srv != nil {
		sharedRabbit.srv.Stop()
	}
	return code
}

func vaultBinary() (string, bool) {
	return findBinary("VAULT_BIN", "vault", filepath.Join(ToolsCache(), "vault-"+VaultVersion))
}

var unsealRE = regexp.MustCompile(`(?m)^Unseal Key: (\S+)`)

func startVault(bin string) (*VaultServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startVaultAt(bin, port, randomToken("airlock-test-root-"))
}

// Start starts a stopped server again on its address with the same root
// token, for tests of a process that starts while Vault is down: its data
// (secrets, auth methods) is gone, as after Stop.
func (v *VaultServer) Start(tb testing.TB) {
	tb.Helper()
	if !v.proc.exited() {
		return
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(v.Addr, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	next, err := startVaultAt(v.Bin, p, v.RootToken)
	if err != nil {
		tb.Fatalf("start Vault again: %v", err)
	}
	v.proc, v.unsealKey, v.home = next.proc, next.unsealKey, next.home
}

func startVaultAt(bin string, port int, rootToken string) (*VaultServer, error) {
	home, err := os.MkdirTemp("", "airlock-vault-")
	if err != nil {
		return nil, err
	}
	v := &VaultServer{Addr: "http://" + loopback(port), RootToken: rootToken, Bin: bin, home: home}
	args := []string{"server", "-dev",
		"-dev-root-token-id=" + v.RootToken,
		"-dev-listen-address=" + loopback(port),
		"-dev-no-store-token",
		"-log-level=warn",
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "VAULT_DISABLE_MLOCK=true"}
	v.proc, err = startProcess(bin, args, env, home)
	if err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	proc := v.proc // Start replaces v.proc
	go func() { <-proc.done; os.RemoveAll(home) }()
	if err := v.waitReady(30 * time.Second); err != nil {
		v.Stop()
		return nil, err
	}
	// The dev banner with the unseal key is printed just after the API
	// comes up.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := unsealRE.FindStringSubmatch(v.proc.out.String()); m != nil {
			v.unsealKey = m[1]
			break
		}
	}
	return v, nil
}

func (v *VaultServer) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if v.proc.exited() {
			return v.proc.describe("vault")
		}
		resp, err := http.Get(v.Addr + "/v1/sys/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("vault not ready after %s; output:\n%s", limit, v.proc.out.String())
}

// Client returns a new API client authenticated with the root token.
func (v *VaultServer) Client(tb testing.TB) *vaultapi.Client {
	tb.Helper()
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	cfg.MaxRetries = 0
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		tb.Fatalf("vault client: %v", err)
	}
	c.SetToken(v.RootToken)
	return c
}

// Seal seals the server, so every read fails until Unseal.
func (v *VaultServer) Seal(tb testing.TB) {
	tb.Helper()
	if err := v.Client(tb).Sys().SealWithContext(context.Background()); err != nil {
		tb.Fatalf("seal vault: %v", err)
	}
}

// Unseal unseals a server sealed by Seal.
func (v *VaultServer) Unseal(tb testing.TB) {
	tb.Helper()
	if v.unsealKey == "" {
		tb.Fatal("vault dev server printed no unseal key")
	}
	st, err := v.Client(tb).Sys().UnsealWithContext(context.Background(), v.unsealKey)
	if err != nil || st.Sealed {
		tb.Fatalf("unseal vault: sealed=%v err=%v", st != nil && st.Sealed, err)
	}
}

// Pause stalls the server (SIGSTOP): connections are accepted by the
// kernel but nothing answers, until Resume.
func (v *VaultServer) Pause() { v.proc.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (v *VaultServer) Resume() { v.proc.signal(syscall.SIGCONT) }

// Stop stops the server; its data is gone.
func (v *VaultServer) Stop() {
	v.Resume() // a paused server would hold SIGTERM until the grace ran out
	v.proc.stop(5 * time.Second)
	// Here too, not only when the process is seen to end: the test
	// binary may exit first.
	_ = os.RemoveAll(v.home)
}
