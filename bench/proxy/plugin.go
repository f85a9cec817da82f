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
	"time"

	"github.com/airlock-dev/airlock/internal/handoff"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// pluginTarget is the load generator run as a plugin of airlock serve at
// one sandbox level.
type pluginTarget struct {
	name    string
	measure func(c int, warmup, window time.Duration, upPid int) sample
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
		var serve func(l net.Listener) (io.Closer, error)
		if level == sandbox.LevelNamespaces {
			serve = func(l net.Listener) (io.Closer, error) { return handoff.Give(socket, tok, l) }
		}
		out = append(out, pluginTarget{name: pluginName(string(level)), measure: func(c int, warmup, window time.Duration, upPid int) sample {
			return runPluginCell(exe, sp, level, serve, u, c, warmup, window, upPid)
		}})
	}
	return out
}

func runPluginCell(exe string, sp serveProc, level sandbox.Level, serve func(net.Listener) (io.Closer, error), u string,
	c int, warmup, window time.Duration, upPid int) sample {
	nice := 0
	p, err := launch.Start(context.Background(), launch.Request{Plugin: "bench-load", Path: exe,
		Args: []string{"-role", "plugin-load", "-c", strconv.Itoa(c), "-warmup", warmup.String(), "-duration", window.String()},
		Env:  []string{"BENCH_URL=" + u, "BENCH_HANDLE=" + sp.handle}, NoHTTPS: true},
		launch.Options{EgressProxy: sp.addr, ProxyServe: serve, Sandbox: sandbox.Config{Level: level,
			ReadOnly: []string{filepath.Dir(exe)}, Limits: sandbox.Limits{Nice: &nice}}})
	check(err)
	mark, fill := cpuMeter([]int{sp.cmd.Process.Pid, upPid, -p.Pid()}) // the plugin with its sandbox's processes
	var s sample
	rd := bufio.NewReaderSize(p.Stdout, 1<<20)
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
	_, _ = io.Copy(io.Discard, p.Stdout)
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
