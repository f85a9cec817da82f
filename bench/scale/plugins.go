package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/sandbox"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// busyWindow is how long every plugin of a host is invoked at once;
// idleWindow, how long their idle CPU is counted.
const (
	busyWindow   = 5 * time.Second
	fixedCallers = 10
	idleWindow   = 5 * time.Second
)

// pluginKind is one plugin protocol: how to add the i-th plugin of that
// kind to a host, and one invocation of it that answers at once.
type pluginKind struct {
	name string
	add  func(h *host.Host, i int) error
	req  func() host.InvokeRequest
}

// benchPlugins starts, for each size n and each kind, one host (this
// process, as airlock host is) with n sandboxed plugins of that kind, and
// measures: the host's RSS, each idle plugin's memory (the RSS and PSS of
// its process tree: the sandbox's init, the plugin) and idle CPU (the
// init watches the plugin's limits four times a second), launch time (one
// plugin after another, so the time is a launch's and not the queue's),
// and invoke latency while every plugin is invoked at once. The plugins
// are the host's own test plugins, built here: a plugin/v1 provider on
// the SDK (gRPC, the HostService dial) and an Executa plugin in Go; their
// calls answer at once, so the latency is the host's path and the
// machine's scheduling, not a plugin's work.
func benchPlugins(ns []int, work string) {
	level := sandbox.LevelOff
	if lv := sandbox.Detect().Levels(); len(lv) > 0 {
		level = lv[0] // the strongest this machine allows
	}
	bins := filepath.Join(work, "plugins")
	check(os.MkdirAll(bins, 0o755))
	check(os.Chmod(work, 0o755)) // a root host runs each plugin as a uid of its own
	provider := goBuild(bins, "../host/pluginv1/testdata/badprovider")
	xplugin := goBuild(bins, "../host/executa/testdata/goplugin")

	// The egress proxy's address: plugins get it in HTTP_PROXY; these
	// plugins send nothing through it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	secrets := filepath.Join(work, "plugins-secrets.yaml")
	check(os.WriteFile(secrets, []byte("tickets/api: {token: scale}\n"), 0o600))
	ref := broker.SecretRef{Source: broker.SourceFile, Path: "tickets/api", Field: "token"}
	inj := broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	bc := broker.Config{EgressProxy: l.Addr().String(), Secrets: broker.SecretsConfig{File: secrets}, Intents: map[string]broker.Intent{
		"tickets.read": {Class: broker.ClassRead, Secret: ref, Inject: inj}, "tickets.write": {Class: broker.ClassWrite, Secret: ref, Inject: inj},
	}}.WithDefaults()
	check(bc.Validate())

	manifest, err := os.ReadFile("../examples/tickets-provider/manifest.yaml")
	check(err)
	kinds := []pluginKind{
		{name: "plugin/v1", add: func(h *host.Host, i int) error {
			return pluginv1.AddProvider(h, installProvider(bins, provider, manifest, i))
		}, req: func() host.InvokeRequest {
			return host.InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets", Input: &ticketsv1.ListTicketsRequest{}}
		}},
		{name: "Executa", add: func(h *host.Host, i int) error {
			return executa.Add(h, executa.PluginConfig{Name: "x" + strconv.Itoa(i), Command: xplugin}, executa.Options{})
		}, req: func() host.InvokeRequest {
			return host.InvokeRequest{Method: "hello", JSON: json.RawMessage(`{"who":"scale"}`)}
		}},
	}
	fmt.Printf("\nPlugins sandboxed at level %s (%d cores).\n", level, runtime.NumCPU())
	fmt.Println("\n| kind | plugins | host RSS MiB | host RSS per plugin KiB | tree RSS KiB (each, idle) | tree PSS KiB (each, idle) | tree USS KiB (each, idle): init + plugin | idle CPU ms/s (each): init + plugin | host idle CPU ms/s | launch p50 ms | launch p99 ms | invoke p50 ms, all busy | invoke p99 ms, all busy | invokes/s | invokes/s, 10 callers |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range kinds {
		for _, n := range ns {
			store := broker.NewMemoryStore(100_000, time.Minute, time.Hour, nil)
			cache := broker.NewSecretCache(map[string]broker.SecretSource{broker.SourceFile: &broker.FileSource{Path: secrets}}, time.Minute, 0, nil, nil)
			nice := 0
			h := host.New(host.Options{Broker: broker.New(bc, store, cache, broker.Options{}), EgressProxy: bc.EgressProxy,
				Policy: policy.AllowAll(), Ports: host.NewPortSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto),
				Sandbox: sandbox.Config{Level: level, ReadOnly: []string{bins}, Limits: sandbox.Limits{Nice: &nice}},
				Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
			measurePlugins(h, k, n)
		}
	}
}

func measurePlugins(h *host.Host, k pluginKind, n int) {
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		h.Shutdown(ctx)
		cancel()
	}()
	debug.FreeOSMemory()
	base := rss(os.Getpid())
	launches := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		check(k.add(h, i))
		launches = append(launches, time.Since(t0))
	}
	time.Sleep(2 * time.Second) // let every plugin settle idle
	debug.FreeOSMemory()
	hostRSS := rss(os.Getpid())
	var tree, init procMem
	var pids []int
	for _, st := range h.Status() {
		if st.State != host.StateRunning {
			check(fmt.Errorf("plugin %s is %s: %s", st.Name, st.State, st.LastFailure))
		}
		tree.add(treeMem(st.Pid))
		init.add(memOf(st.Pid)) // the supervised process is the sandbox's init
		pids = append(pids, st.Pid)
	}
	// Idle CPU: what the inits and plugins use while nothing calls them.
	// The host's is read just around the window: reading the plugins'
	// counters is this bench's work, not the host's.
	initCPU0, treeCPU0 := cpuOf(pids, false), cpuOf(pids, true)
	host0 := cpuTime(os.Getpid())
	time.Sleep(idleWindow)
	hostCPU := cpuTime(os.Getpid()) - host0
	initCPU, treeCPU := cpuOf(pids, false)-initCPU0, cpuOf(pids, true)-treeCPU0
	l50, l99 := quantiles(launches)

	// Every plugin invoked at once, one call after another each, for the
	// window; then fixedCallers callers spread over all the plugins,
	// which keeps the concurrency of the smallest size and so separates
	// what the number of callers costs from what the number of plugins
	// does.
	names := h.Names()
	lats := busy(h, k, names, len(names))
	fixed := busy(h, k, names, fixedCallers)
	i50, i99 := quantiles(lats)
	each := func(b int64) float64 { return float64(b) / float64(n) / 1024 }
	perSec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / idleWindow.Seconds() }
	fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f + %.0f | %.2f + %.2f | %.1f | %s | %s | %s | %s | %.0f | %.0f |\n", k.name, n, float64(hostRSS)/(1<<20),
		each(hostRSS-base), each(tree.rss), each(tree.pss), each(init.uss), each(tree.uss-init.uss),
		perSec(initCPU)/float64(n), perSec(treeCPU-initCPU)/float64(n), perSec(hostCPU),
		ms(l50), ms(l99), ms(i50), ms(i99), float64(len(lats))/busyWindow.Seconds(), float64(len(fixed))/busyWindow.Seconds())
}

// busy runs callers callers for busyWindow, caller i calling plugins i,
// i+callers, … in turn, one call at a time, and returns every call's
// latency.
func busy(h *host.Host, k pluginKind, names []string, callers int) []time.Duration {
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(busyWindow)
	for c := range min(callers, len(names)) {
		wg.Go(func() {
			var mine []time.Duration
			for i := c; time.Now().Before(end); i += callers {
				name := names[i%len(names)]
				req := k.req()
				req.Deadline = time.Now().Add(time.Minute)
				t0 := time.Now()
				out, err := h.Invoke(context.Background(), name, req)
				if err == nil && out.Status != host.CallSucceeded {
					err = fmt.Errorf("%s: %s %s", name, out.Status, out.Reason)
				}
				check(err)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return lats
}

// installProvider lays out the i-th copy of the provider as airlock host
// install would: its own directory, binary, manifest and a name of its
// own.
func installProvider(bins, provider string, manifest []byte, i int) pluginv1.Installed {
	dir := filepath.Join(bins, "p"+strconv.Itoa(i))
	check(os.MkdirAll(dir, 0o755))
	bin := filepath.Join(dir, filepath.Base(provider))
	if _, err := os.Stat(bin); err != nil {
		check(os.Link(provider, bin))
	}
	check(os.WriteFile(filepath.Join(dir, "manifest.yaml"), manifest, 0o644))
	check(os.WriteFile(filepath.Join(dir, "behavior"), []byte("ok"), 0o644))
	m, err := pluginv1.LoadManifest(filepath.Join(dir, "manifest.yaml"))
	check(err)
	digest, err := pluginv1.BinaryDigest(bin)
	check(err)
	return pluginv1.Installed{Name: "p" + strconv.Itoa(i), Binary: bin, BinarySHA256: digest, Manifest: m, ProtocolVersion: 1}
}

// goBuild builds the package at pkg (relative to bench/) into dir.
func goBuild(dir, pkg string) string {
	out := filepath.Join(dir, filepath.Base(pkg))
	b, err := exec.Command("go", "build", "-trimpath", "-o", out, pkg).CombinedOutput()
	if err != nil {
		check(fmt.Errorf("build %s: %v\n%s", pkg, err, b))
	}
	return out
}

// procMem is a process's (or a tree's) memory in bytes: RSS counts every
// page it maps; PSS counts a page shared by k processes as 1/k in each
// (the plugins share one binary's text, the inits another's); USS counts
// only its private pages, what would be freed if it exited.
type procMem struct{ rss, pss, uss int64 }

func (m *procMem) add(o procMem) { m.rss, m.pss, m.uss = m.rss+o.rss, m.pss+o.pss, m.uss+o.uss }

// treeMem is the memory of pid and every process below it.
func treeMem(pid int) procMem {
	m := memOf(pid)
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				m.add(treeMem(n))
			}
		}
	}
	return m
}

func memOf(pid int) procMem {
	f := "/proc/" + strconv.Itoa(pid) + "/smaps_rollup"
	return procMem{rss: procKB(f, "Rss:"), pss: procKB(f, "Pss:"), uss: procKB(f, "Private_Clean:") + procKB(f, "Private_Dirty:")}
}

// cpuOf is the CPU time of the processes pids (with everything below
// them when tree is set).
func cpuOf(pids []int, tree bool) time.Duration {
	var d time.Duration
	for _, pid := range pids {
		d += cpuTime(pid)
		if !tree {
			continue
		}
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					d += cpuOf([]int{n}, true)
				}
			}
		}
	}
	return d
}

// cpuTime is the time pid's threads have run, from the scheduler's
// nanosecond counters.
func cpuTime(pid int) time.Duration {
	var d time.Duration
	stats, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	for _, f := range stats {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			n, _ := strconv.ParseInt(fs[0], 10, 64)
			d += time.Duration(n)
		}
	}
	return d
}

func rss(pid int) int64 { return procKB("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:") }

func procKB(file, field string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1e3) }
