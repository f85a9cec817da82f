package launch

import (
	"context"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

func benchLevels() []sandbox.Level {
	out := []sandbox.Level{sandbox.LevelOff}
	s := sandbox.Detect()
	if s.Namespaces {
		out = append(out, sandbox.LevelNamespaces)
	}
	if s.LandlockABI >= sandbox.LandlockMinABI {
		out = append(out, sandbox.LevelLandlock)
	}
	return out
}

// BenchmarkLaunch is one plugin process's start and exit (a program that
// exits at once) at each level: what the sandbox adds to a launch.
func BenchmarkLaunch(b *testing.B) {
	for _, level := range benchLevels() {
		b.Run(string(level), func(b *testing.B) {
			for b.Loop() {
				p, err := Start(context.Background(), Request{Plugin: "bench", Path: "/bin/true"}, Options{Sandbox: sandbox.Config{Level: level}})
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, p.Stdout)
				<-p.Exited()
			}
		})
	}
}

// BenchmarkProxiedRequests is a plugin's HTTP requests through
// HTTP_PROXY, 16 at a time, at each level: at the namespaces level each
// connection crosses the host's relay. ns/op is per request (the launch
// is amortized over b.N).
func BenchmarkProxiedRequests(b *testing.B) {
	proxy := fakeProxy(b)
	for _, level := range benchLevels() {
		b.Run(string(level), func(b *testing.B) {
			env := []string{"ATTACK_N=" + strconv.Itoa(b.N), "ATTACK_PROXIED=http://api.example.com/x"}
			p, err := Start(context.Background(), Request{Plugin: "bench", Path: filepath.Join(attackerDir, "attacker"), Args: []string{"load"}, Env: env},
				Options{EgressProxy: proxy, Sandbox: sandbox.Config{Level: level, ReadOnly: []string{attackerDir}}})
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, p.Stdout)
			<-p.Exited()
			if err := p.Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
