package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/handoff"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// pluginTarget is the load generator run as a plugin of airlock serve at
// one sandbox level.
type pluginTarget struct {
	name  string
	level sandbox.Level
	// measure runs one cell; a zero startAt starts its window after
	// warmup, another starts it then (so that two plugins measure the
	// same window).
	measure func(c int, warmup, window time.Duration, upPid int, startAt time.Time) sample
}

// pluginTargets run this program as a plugin (role plugin-load) through
// the launch layer, as airlock host runs plugins, against the serve
// binary's proxy: unconfined (direct TCP), and at each sandbox level this
// machine allows — namespaces with the plugin's in-sandbox listener handed
// to serve over the handoff socket (as airlock host beside airlock serve
// does), landlock with direct TCP to the proxy. Each runs at nice 0, like
// the unconfined one, so that the comparison is the sandbox's cost and not
// the scheduler's.
func pluginTargets(sp serveProc, dir, u string) []pluginTarget {
	exe, err := os.Executable()
	check(err)
	tok, err := peerauth.ReadToken("broker.api.token_file", path(dir, "broker.token"))
	check(err)
	socket := handoff.Path(path(dir, "broker.sock"))
	var out []pluginTarget
	for _, level := range append([]sandbox.Level{sandbox.LevelOff}, sandbox.Detect().Levels()...) {
		var serve func(plugin string, l net.Listener) (io.Closer, error)
		if level == sandbox.LevelNamespaces {
			serve = func(plugin string, l net.Listener) (io.Closer, error) { return handoff.Give(socket, tok, plugin, l) }
		}
		out = append(out, pluginTarget{name: pluginName(string(level)), level: level,
			measure: func(c int, warmup, window time.Duration, upPid int, startAt time.Time) sample {
				return runPluginCell(exe, sp, level, serve, u, c, warmup, window, upPid, startAt)
			}})
	}
	return out
}

func runPluginCell(exe string, sp serveProc, level sandbox.Level, serve func(string, net.Listener) (io.Closer, error), u string,
	c int, warmup, window time.Duration, upPid int, startAt time.Time) sample {
	nice := 0
	env := []string{"BENCH_URL=" + u, "BENCH_HANDLE=" + sp.handle}
	if !startAt.IsZero() {
		env = append(env, "BENCH_START="+strconv.FormatInt(startAt.UnixNano(), 10))
	}
	// The plugin's name is the one serve's handle was issued to: on its
	// own listener the proxy takes no other plugin's handle.
	p, err := launch.Start(context.Background(), launch.Request{Plugin: benchPlugin, Path: exe,
		Args: []string{"-role", "plugin-load", "-c", strconv.Itoa(c), "-warmup", warmup.String(), "-duration", window.String()},
		Env:  env, NoHTTPS: true},
		launch.Options{EgressProxy: sp.addr, ProxyServe: serve, Sandbox: sandbox.Config{Level: level,
			ReadOnly: []string{filepath.Dir(exe)}, Limits: sandbox.Limits{Nice: &nice}}})
	check(err)
	mark, fill := cpuMeter([]int{sp.cmd.Process.Pid, upPid, -p.Pid()}) // the plugin with its sandbox's processes
	var s sample
	rd := bufio.NewReaderSize(p.Stdout(), 1<<20)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		switch f := strings.Fields(line); {
		case len(f) == 1 && f[0] == "start":
			mark(true)
		case len(f) == 1 && f[0] == "end":
			mark(false)
		case len(f) >= 3 && f[0] == "result":
			s.errors, _ = strconv.Atoi(f[1])
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			s.dur = time.Duration(ns)
			for _, v := range f[3:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.lats = append(s.lats, time.Duration(n))
			}
		}
	}
	_, _ = io.Copy(io.Discard, p.Stdout())
	<-p.Exited()
	if err := p.Err(); err != nil {
		check(fmt.Errorf("bench plugin (sandbox %s): %w", level, err))
	}
	fill(&s)
	return s
}

// runPluginLoad is the plugin: the same load loop as every other target,
// through the HTTP_PROXY its launcher set, with the handle as the proxy
// URL's user name (as a plugin author's stock client does).
func runPluginLoad(concs string, warmup, window time.Duration) {
	c, err := strconv.Atoi(concs)
	check(err)
	if v := os.Getenv("BENCH_START"); v != "" {
		ns, err := strconv.ParseInt(v, 10, 64)
		check(err)
		warmup = time.Until(time.Unix(0, ns))
	}
	pu, err := url.Parse(os.Getenv("HTTP_PROXY"))
	check(err)
	pu.User = url.User(os.Getenv("BENCH_HANDLE"))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		MaxIdleConnsPerHost: c, DisableCompression: true}}
	out := bufio.NewWriter(os.Stdout)
	s := load(client, os.Getenv("BENCH_URL"), c, warmup, window, func(start bool) {
		if start {
			fmt.Fprintln(out, "start")
		} else {
			fmt.Fprintln(out, "end")
		}
		check(out.Flush())
	})
	fmt.Fprintf(out, "result %d %d", s.errors, int64(s.dur))
	for _, l := range s.lats {
		fmt.Fprintf(out, " %d", int64(l))
	}
	fmt.Fprintln(out)
	check(out.Flush())
}

// measurePairs runs each sandboxed level side by side with the unconfined
// plugin: both at concurrency c at once, measuring the same window, so
// that whatever slows the machine down (this VM's speed drifts by a tenth
// within seconds) slows both alike. It returns, per level and
// concurrency, the requests the sandboxed and the unconfined plugin
// completed; the plugins share the CPU, so the sandboxed one completes
// fewer exactly when each of its requests costs the machine more.
func measurePairs(plugs []pluginTarget, cs []int, rounds int, duration, warmup time.Duration, upPid int) map[sandbox.Level]map[int][2]int {
	out := map[sandbox.Level]map[int][2]int{}
	if len(plugs) < 2 || plugs[0].level != sandbox.LevelOff {
		return out
	}
	slice := duration / time.Duration(rounds)
	for round := range rounds {
		for _, c := range cs {
			for _, pt := range plugs[1:] {
				// Launching takes a few to tens of milliseconds: both
				// windows start after the later launch.
				startAt := time.Now().Add(warmup + 200*time.Millisecond)
				var pair [2]sample
				var wg sync.WaitGroup
				for i, t := range []pluginTarget{pt, plugs[0]} {
					wg.Go(func() { pair[i] = t.measure(c, warmup, slice, upPid, startAt) })
				}
				wg.Wait()
				if out[pt.level] == nil {
					out[pt.level] = map[int][2]int{}
				}
				n := out[pt.level][c]
				n[0] += len(pair[0].lats)
				n[1] += len(pair[1].lats)
				out[pt.level][c] = n
				fmt.Fprintf(os.Stderr, "round %d  side by side, %-10s c=%-3d %8.0f / %.0f req/s\n", round+1, pt.level, c,
					float64(len(pair[0].lats))/slice.Seconds(), float64(len(pair[1].lats))/slice.Seconds())
			}
		}
	}
	return out
}

// treeCPU is the CPU time of pid and every process below it (a sandbox's
// init, the plugin under it).
func treeCPU(pid int) time.Duration {
	t := cpuTime(pid)
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				t += treeCPU(n)
			}
		}
	}
	return t
}
