package launch

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

func benchLevels() []sandbox.Level {
	return append([]sandbox.Level{sandbox.LevelOff}, sandbox.Detect().Levels()...)
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
				_, _ = io.Copy(io.Discard, p.Stdout())
				<-p.Exited()
			}
		})
	}
}

// BenchmarkProxiedRequests is a plugin's HTTP requests through
// HTTP_PROXY, 16 at a time, at each level: at the namespaces level each
// connection crosses the host's relay. ns/op is per request (the launch
// is amortized over b.N).
//
// "namespaces-handoff" hands the plugin's listener to the proxy itself
// (Options.ProxyServe, as airlock dev and an airlock host beside its
// airlock serve do): no relay hop.
//
// The plugin runs at nice 0 here, as an unconfined one does: the default
// priority (10) yields the CPU to the proxy, which on a saturated machine
// is the point, and is not what this compares.
func BenchmarkProxiedRequests(b *testing.B) {
	nice := 0
	proxy := fakeProxy(b)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "proxied "+r.URL.Host) })
	handoff := func(_ string, l net.Listener) (io.Closer, error) {
		srv := &http.Server{Handler: handler}
		go func() { _ = srv.Serve(l) }()
		return srv, nil
	}
	type variant struct {
		name  string
		level sandbox.Level
		serve func(string, net.Listener) (io.Closer, error)
	}
	var variants []variant
	for _, level := range benchLevels() {
		variants = append(variants, variant{string(level), level, nil})
		if level == sandbox.LevelNamespaces {
			variants = append(variants, variant{"namespaces-handoff", level, handoff})
		}
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			env := []string{"ATTACK_N=" + strconv.Itoa(b.N), "ATTACK_PROXIED=http://api.example.com/x"}
			p, err := Start(context.Background(), Request{Plugin: "bench", Path: filepath.Join(attackerDir, "attacker"), Args: []string{"load"}, Env: env},
				Options{EgressProxy: proxy, ProxyServe: v.serve, Sandbox: sandbox.Config{Level: v.level, ReadOnly: []string{attackerDir},
					Limits: sandbox.Limits{Nice: &nice}}})
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, p.Stdout())
			<-p.Exited()
			if err := p.Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
