package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// The serve binary's targets: the binary users run, reported first.
const (
	serveName          = "airlock serve (binary, audit file)"
	serveInterceptName = "airlock serve (CONNECT intercept)"
	smokescreenName    = "smokescreen (CONNECT)"
	floorName          = "floor (raw TLS forwarder)"
	parsingFloorName   = "floor + net/http head parsing"
)

// report prints every cell, then the ratios: the serve binary's first.
func report(names []string, cs []int, results map[string]map[int]result, direct map[string]bool, pairs map[sandbox.Level]map[int][2]int) {
	fmt.Printf("\n| target | c | req/s | p50 ms | p99 ms | proxy CPU µs/req | of it user | upstream | client |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range names {
		for _, c := range cs {
			r := results[name][c]
			proxyCPU, user := "—", "—"
			if !direct[name] {
				proxyCPU, user = fmt.Sprintf("%.1f", r.cpu[0]), fmt.Sprintf("%.1f", r.user)
			}
			fmt.Printf("| %s | %d | %.0f | %.3f | %.3f | %s | %s | %.1f | %.1f |\n", name, c, r.rps, ms(r.p50), ms(r.p99),
				proxyCPU, user, r.cpu[1], r.cpu[2])
		}
	}
	fmt.Printf("\n| ratio | %s |\n|---|%s\n", joinInts(cs, " | c=", "c="), strings.Repeat("---|", len(cs)))
	ratioOf := func(label, a, b string, of func(result) float64) {
		if results[a] == nil || results[b] == nil {
			return
		}
		var parts []string
		for _, c := range cs {
			parts = append(parts, fmt.Sprintf("%.2f×", of(results[a][c])/of(results[b][c])))
		}
		fmt.Printf("| %s | %s |\n", label, strings.Join(parts, " | "))
	}
	rps := func(r result) float64 { return r.rps }
	proxyCPU := func(r result) float64 { return r.cpu[0] }
	ratio := func(label, a, b string) { ratioOf(label, a, b, rps) }
	cpuRatio := func(label, a, b string) { ratioOf(label, a, b, proxyCPU) }
	userRatio := func(label, a, b string) { ratioOf(label, a, b, func(r result) float64 { return r.user }) }
	sysRatio := func(label, a, b string) { ratioOf(label, a, b, func(r result) float64 { return r.cpu[0] - r.user }) }

	// The binary users run.
	ratio("serve binary / smokescreen", serveName, smokescreenName)
	ratio("serve CONNECT intercept / smokescreen CONNECT", serveInterceptName, smokescreenName)
	cpuRatio("proxy CPU per request, serve binary / floor", serveName, floorName)
	cpuRatio("proxy CPU per request, serve intercept / floor", serveInterceptName, floorName)
	// Where the CPU goes: the kernel's share (system calls, loopback TCP)
	// against the user-space share (Go: parsing, checks, TLS, GC).
	sysRatio("proxy system CPU per request, serve binary / floor", serveName, floorName)
	userRatio("proxy user CPU per request, serve binary / floor", serveName, floorName)
	userRatio("proxy user CPU per request, floor + net/http parsing / floor", parsingFloorName, floorName)
	for _, level := range []sandbox.Level{sandbox.LevelNamespaces, sandbox.LevelLandlock} {
		ratio("sandboxed plugin ("+string(level)+") / unconfined plugin", pluginName(string(level)), pluginName("off"))
		if n := pairs[level]; n != nil {
			var parts []string
			for _, c := range cs {
				parts = append(parts, fmt.Sprintf("%.2f×", float64(n[c][0])/float64(max(n[c][1], 1))))
			}
			fmt.Printf("| sandboxed plugin (%s) / unconfined plugin, side by side | %s |\n", level, strings.Join(parts, " | "))
		}
	}
	ratio("serve binary / tokenizer", serveName, "tokenizer")
	ratio("serve intercept / tokenizer", serveInterceptName, "tokenizer")
	cpuRatio("proxy CPU per request, serve binary / tokenizer", serveName, "tokenizer")
	ratio("serve binary / mitmproxy with an injecting addon", serveName, mitmName)
	ratio("serve intercept / mitmproxy with an injecting addon", serveInterceptName, mitmName)
	ratio("serve binary / in-process, audit discarded", serveName, "airlock")
	for _, n := range names {
		if strings.HasPrefix(n, "airlock serve @") {
			ratio(strings.TrimPrefix(n, "airlock ")+" / smokescreen", n, smokescreenName)
			ratio(strings.TrimPrefix(n, "airlock ")+" / serve binary", n, serveName)
			cpuRatio("proxy CPU per request, "+strings.TrimPrefix(n, "airlock ")+" / serve binary", n, serveName)
		}
		if what, ok := strings.CutPrefix(n, "airlock serve ("); ok && strings.HasPrefix(what, "tracing ") {
			ratio("serve with "+strings.TrimSuffix(what, ")")+" / serve", n, serveName)
			cpuRatio("proxy CPU per request, serve with "+strings.TrimSuffix(what, ")")+" / serve", n, serveName)
		}
	}
	cpuRatio("proxy CPU per request, serve binary / smokescreen", serveName, smokescreenName)
	ratio("floor / smokescreen", floorName, smokescreenName)
	cpuRatio("proxy CPU per request, floor + net/http parsing / floor", parsingFloorName, floorName)
	cpuRatio("proxy CPU per request, serve binary / floor + net/http parsing", serveName, parsingFloorName)

	// The in-process proxy and its variants.
	ratio("airlock / smokescreen", "airlock", smokescreenName)
	cpuRatio("proxy CPU per request, airlock / smokescreen", "airlock", smokescreenName)
	cpuRatio("proxy CPU per request, airlock / floor", "airlock", floorName)
	ratio("airlock / bare goproxy", "airlock", "bare goproxy")
	ratio("airlock CONNECT intercept / smokescreen CONNECT", "airlock (CONNECT intercept)", smokescreenName)
	cpuRatio("proxy CPU per request, intercept / smokescreen", "airlock (CONNECT intercept)", smokescreenName)
	ratio("airlock redis store / memory store", "airlock (redis store)", "airlock")
	for _, kind := range []string{"hmac", "aws_sigv4", "oauth2"} {
		ratio("processor "+kind+" / header injection", "airlock ("+kind+")", "airlock")
		cpuRatio("proxy CPU per request, "+kind+" / header injection", "airlock ("+kind+")", "airlock")
	}
	ratio("airlock / direct", "airlock", "direct HTTPS")
	var added []string
	for _, c := range cs {
		if results["airlock"] == nil || results["direct HTTPS"] == nil {
			break
		}
		added = append(added, fmt.Sprintf("%.3f ms", ms(results["airlock"][c].p99-results["direct HTTPS"][c].p99)))
	}
	if added != nil {
		fmt.Printf("| airlock p99 added vs direct | %s |\n", strings.Join(added, " | "))
	}
}

// saveProfile starts a CPU profile of the process whose admin listener is
// admin, covering the measuring window that starts after warmup; the
// returned func waits for it and writes dir/name.pprof.
func saveProfile(dir, admin, name string, warmup, window time.Duration) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(warmup)
		secs := max(1, int(window.Round(time.Second)/time.Second))
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs))
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
			return
		}
		defer resp.Body.Close()
		check(os.MkdirAll(dir, 0o755))
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		check(err)
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		check(err)
	}()
	return func() { <-done }
}

// slug turns a target's name into a file name.
func slug(name string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name)), "-")
}

// pluginName is the target of the load generator run as a plugin at a
// sandbox level ("off": unconfined).
func pluginName(level string) string { return "serve, plugin (sandbox " + level + ")" }
