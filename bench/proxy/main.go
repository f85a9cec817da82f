// Command proxy-bench measures, in one run, requests/s and p50/p99 latency
// at several concurrencies for: direct HTTPS to the upstream; a bare
// goproxy forwarder doing the same http->https upgrade with no checks;
// Airlock's egress proxy with a credentialed handle (injection and echo
// guard on); the floor, a raw TLS-originating forwarder that does no
// checks (see runFloor), and the same with both heads parsed by net/http
// (runParsingFloor); and, when their binaries are given, smokescreen
// (CONNECT), superfly/tokenizer (the same-job peer), mitmproxy with an
// injecting addon (what agent sandboxes run) and the airlock binary
// running `airlock serve` with its JSON audit log written to a file.
// Upstream, proxies and the load generator run as separate processes.
//
//	go run ./bench/proxy -smokescreen ~/.cache/airlock-tools/bin/smokescreen
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

const benchHost = "bench.airlock.test"

func main() {
	sandbox.Init() // the plugin targets' sandboxes start through a re-executed copy of this program
	role := flag.String("role", "", "internal: run one component (upstream, goproxy, airlock)")
	dir := flag.String("dir", "", "internal: working directory with the CA and certificates")
	upstreamAddr := flag.String("upstream", "", "internal: upstream address")
	smokescreen := flag.String("smokescreen", "", "path to a smokescreen binary (skipped when empty)")
	duration := flag.Duration("duration", 6*time.Second, "measuring time per cell, split over the rounds")
	warmup := flag.Duration("warmup", 300*time.Millisecond, "warm-up time per cell and round")
	rounds := flag.Int("rounds", 3, "interleave the targets this many times, so that a machine that speeds up or slows down during the run affects every target alike")
	concs := flag.String("c", "1,16,64", "concurrencies")
	bodySize := flag.Int("body", 512, "upstream response body size")
	only := flag.String("only", "", "measure only targets whose name contains one of these (comma-separated)")
	redisServer := flag.String("redis-server", "", "a redis-server binary: also measure Airlock with the Redis handle store (skipped when empty)")
	redisAddr := flag.String("redis", "", "internal: the Redis handle store's address")
	tokenizerBin := flag.String("tokenizer", "", "a superfly/tokenizer binary: also measure it, the same-job peer (skipped when empty)")
	mitmdump := flag.String("mitmdump", "", "a mitmdump binary: also measure mitmproxy with an injecting addon, as agent sandboxes run it (skipped when empty)")
	inject := flag.String("inject", "header", "internal: the airlock role's inject kind")
	processors := flag.Bool("processors", false, "also measure Airlock with each credential processor (hmac, aws_sigv4, oauth2 with a cached token)")
	airlockBin := flag.String("airlock-bin", "", "an airlock binary: also measure `airlock serve` as users run it, JSON audit log to a file (skipped when empty)")
	profile := flag.String("profile", "", "a directory: save a CPU profile of `airlock serve` (from its admin listener) for each of its cells in the first round")
	pluginRounds := flag.Int("plugin-rounds", 8, "interleave the plugin targets (sandbox levels) this many times, after the others")
	pluginDuration := flag.Duration("plugin-duration", 16*time.Second, "measuring time per plugin cell, split over its rounds")
	pluginWarmup := flag.Duration("plugin-warmup", 300*time.Millisecond, "warm-up time per plugin cell and round")
	conns := flag.String("conns", "", "with -airlock-bin: instead of the load table, measure the serve binary with this many tunnels and WebSockets open (comma-separated counts, e.g. 1000,5000,10000)")
	compare := flag.String("compare", "", "with -airlock-bin: also measure other airlock binaries as `airlock serve` beside it, interleaved (comma-separated name=path, e.g. old=/tmp/airlock-old), to find a change that made a difference")
	tracing := flag.Float64("tracing", 0, "with -airlock-bin: also measure a second `airlock serve` with tracing on at this sample ratio (e.g. 0.01), exporting to an OTLP receiver in this process that discards what it gets")
	sandboxed := flag.Bool("sandboxed", true, "with -airlock-bin: also measure the load generator as a plugin at each sandbox level this machine allows, next to it unconfined")
	flag.Parse()

	switch *role {
	case "upstream":
		runUpstream(*dir, *bodySize)
		return
	case "goproxy":
		runGoproxy(*dir, *upstreamAddr)
		return
	case "airlock":
		runAirlock(*dir, *upstreamAddr, *redisAddr, *inject)
		return
	case "floor":
		runFloor(*dir, *upstreamAddr)
		return
	case "parsing-floor":
		runParsingFloor(*dir, *upstreamAddr)
		return
	case "plugin-load":
		runPluginLoad(*concs, *warmup, *duration)
		return
	}

	work, err := os.MkdirTemp("", "airlock-bench-")
	check(err)
	defer os.RemoveAll(work)
	writeCerts(work)

	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	start := func(args ...string) ([]string, int) {
		c := exec.Command(os.Args[0], args...)
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		check(err)
		check(c.Start())
		children = append(children, c)
		line, err := bufio.NewReader(out).ReadString('\n')
		check(err)
		return strings.Fields(line), c.Process.Pid
	}
	upOut, upPid := start("-role", "upstream", "-dir", work, "-body", strconv.Itoa(*bodySize))
	up := upOut[0]
	gpOut, gpPid := start("-role", "goproxy", "-dir", work, "-upstream", up)
	gp := gpOut[0]
	al, alPid := start("-role", "airlock", "-dir", work, "-upstream", up)
	flOut, flPid := start("-role", "floor", "-dir", work, "-upstream", up)
	pfOut, pfPid := start("-role", "parsing-floor", "-dir", work, "-upstream", up)
	_, upPort, _ := net.SplitHostPort(up)

	type target struct {
		name   string
		url    string
		client func(c int) *http.Client
		pid    int    // the proxy's process, 0 for none
		admin  string // the proxy's admin listener, when it serves /debug/pprof/
		// plugin, when set, measures a cell by running the load generator
		// as a plugin (see pluginTargets) instead of in this process.
		plugin func(c int, warmup, window time.Duration, upPid int) sample
	}
	roots := loadRoots(work)
	pinned := func(c int, proxy *url.URL) *http.Client {
		tr := &http.Transport{
			MaxIdleConnsPerHost: c, DisableCompression: true, TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if strings.HasPrefix(addr, benchHost+":") {
					addr = "127.0.0.1:" + upPort
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}
		if proxy != nil {
			tr.Proxy = http.ProxyURL(proxy)
		}
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	targets := []target{
		{"direct HTTPS", "https://" + benchHost + ":" + upPort + "/", func(c int) *http.Client { return pinned(c, nil) }, 0, "", nil},
		{"bare goproxy", "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: gp})
		}, gpPid, "", nil},
		{"airlock", "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: al[0], User: url.User(al[1])})
		}, alPid, "", nil},
		{"airlock (CONNECT intercept)", "https://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: al[0], User: url.User(al[1])})
		}, alPid, "", nil},
		{"floor (raw TLS forwarder)", "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: flOut[0]})
		}, flPid, "", nil},
		{parsingFloorName, "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: pfOut[0]})
		}, pfPid, "", nil},
	}
	if *redisServer != "" {
		port := freePort()
		c := exec.Command(*redisServer, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		c.Stdout, c.Stderr = io.Discard, io.Discard
		check(c.Start())
		children = append(children, c)
		time.Sleep(300 * time.Millisecond)
		rl, rlPid := start("-role", "airlock", "-dir", work, "-upstream", up, "-redis", "127.0.0.1:"+strconv.Itoa(port))
		targets = append(targets, target{"airlock (redis store)", "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: rl[0], User: url.User(rl[1])})
		}, rlPid, "", nil})
	}
	if *processors {
		for _, kind := range []string{"hmac", "aws_sigv4", "oauth2"} {
			po, pPid := start("-role", "airlock", "-dir", work, "-upstream", up, "-inject", kind)
			targets = append(targets, target{"airlock (" + kind + ")", "http://" + benchHost + ":" + upPort + "/", func(c int) *http.Client {
				return pinned(c, &url.URL{Scheme: "http", Host: po[0], User: url.User(po[1])})
			}, pPid, "", nil})
		}
	}
	if *conns != "" && *airlockBin != "" {
		var ns []int
		for _, f := range strings.Split(*conns, ",") {
			n, err := strconv.Atoi(f)
			check(err)
			ns = append(ns, n)
		}
		benchConns(ns, *airlockBin, work, up, upPort, roots)
		return
	}
	var binTargets []target
	var plugs []pluginTarget
	if *airlockBin != "" {
		sp := startServeBinary(*airlockBin, work, up)
		children = append(children, sp.cmd)
		proxyURL := &url.URL{Scheme: "http", Host: sp.addr, User: url.User(sp.handle)}
		binTargets = append(binTargets,
			target{name: serveName, url: "http://" + benchHost + ":" + upPort + "/", client: func(c int) *http.Client { return pinned(c, proxyURL) },
				pid: sp.cmd.Process.Pid, admin: sp.admin},
			target{name: serveInterceptName, url: "https://" + benchHost + ":" + upPort + "/", client: func(c int) *http.Client { return pinned(c, proxyURL) },
				pid: sp.cmd.Process.Pid, admin: sp.admin})
		for _, nb := range strings.Split(*compare, ",") {
			name, bin, ok := strings.Cut(nb, "=")
			if !ok {
				continue
			}
			cp := startServeBinaryAs(bin, work, up, "-"+name, "")
			children = append(children, cp.cmd)
			cu := &url.URL{Scheme: "http", Host: cp.addr, User: url.User(cp.handle)}
			binTargets = append(binTargets, target{name: "airlock serve @" + name, url: "http://" + benchHost + ":" + upPort + "/",
				client: func(c int) *http.Client { return pinned(c, cu) }, pid: cp.cmd.Process.Pid, admin: cp.admin})
		}
		if *tracing > 0 {
			tp := startServeBinaryAs(*airlockBin, work, up, "-tracing", fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: %g}\n", otlpSink(), *tracing))
			children = append(children, tp.cmd)
			tracedURL := &url.URL{Scheme: "http", Host: tp.addr, User: url.User(tp.handle)}
			binTargets = append(binTargets, target{name: serveTracingName(*tracing), url: "http://" + benchHost + ":" + upPort + "/",
				client: func(c int) *http.Client { return pinned(c, tracedURL) }, pid: tp.cmd.Process.Pid, admin: tp.admin})
		}
		if *sandboxed {
			plugs = pluginTargets(sp, work, "http://"+benchHost+":"+upPort+"/")
			for _, pt := range plugs {
				binTargets = append(binTargets, target{name: pt.name, pid: sp.cmd.Process.Pid, admin: sp.admin,
					plugin: func(c int, warmup, window time.Duration, upPid int) sample {
						return pt.measure(c, warmup, window, upPid, time.Time{})
					}})
			}
		}
		defer func() { fmt.Fprintf(os.Stderr, "airlock serve wrote %d audit lines\n", auditLines(work)) }()
	}
	// The binary is what users run: its rows come first.
	targets = append(binTargets, targets...)
	if *tokenizerBin != "" {
		ta, th, tc := startTokenizer(*tokenizerBin, work, "127.0.0.1:"+upPort)
		children = append(children, tc)
		targets = append(targets, target{"tokenizer", "http://127.0.0.1:" + upPort + "/", func(c int) *http.Client {
			cl := pinned(c, &url.URL{Scheme: "http", Host: ta})
			cl.Transport = withHeaders{rt: cl.Transport, h: th}
			return cl
		}, tc.Process.Pid, "", nil})
	}
	if *mitmdump != "" {
		ma, mc := startMitmproxy(*mitmdump, work, roots)
		children = append(children, mc)
		targets = append(targets, target{mitmName, "https://127.0.0.1:" + upPort + "/", func(c int) *http.Client {
			return pinned(c, &url.URL{Scheme: "http", Host: ma})
		}, mc.Process.Pid, "", nil})
	}
	if *smokescreen != "" {
		port := freePort()
		c := exec.Command(*smokescreen, "--listen-ip", "127.0.0.1", "--listen-port", strconv.Itoa(port),
			"--allow-range", "127.0.0.0/8")
		c.Stdout, c.Stderr = io.Discard, io.Discard
		check(c.Start())
		children = append(children, c)
		waitListening(fmt.Sprintf("127.0.0.1:%d", port))
		targets = append(targets, target{"smokescreen (CONNECT)", "https://127.0.0.1:" + upPort + "/", func(cc int) *http.Client {
			return pinned(cc, &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)})
		}, c.Process.Pid, "", nil})
	}

	results := map[string]map[int]result{}
	var cs []int
	for _, s := range strings.Split(*concs, ",") {
		n, err := strconv.Atoi(s)
		check(err)
		cs = append(cs, n)
	}
	targets = slices.DeleteFunc(targets, func(t target) bool {
		return *only != "" && !slices.ContainsFunc(strings.Split(*only, ","), func(s string) bool { return strings.Contains(t.name, s) })
	})
	samples := map[string]map[int]*sample{}
	for _, t := range targets {
		samples[t.name] = map[int]*sample{}
		for _, c := range cs {
			samples[t.name][c] = &sample{}
		}
	}
	// The plugin targets are compared with each other, a few percent
	// apart, so they get a phase of their own with more and longer
	// slices: one slice of a cell varies by a tenth or more on this VM.
	var mainTargets, plugTargets []target
	for _, t := range targets {
		if t.plugin != nil {
			plugTargets = append(plugTargets, t)
		} else {
			mainTargets = append(mainTargets, t)
		}
	}
	measure := func(targets []target, rounds int, duration, warmup time.Duration) {
		slice := duration / time.Duration(rounds)
		for round := range rounds {
			for _, c := range cs {
				// Each round starts one target further on, so that no
				// target always follows the same one.
				for i := range targets {
					t := targets[(i+round)%len(targets)]
					var saved func()
					if *profile != "" && t.admin != "" && round == 0 {
						saved = saveProfile(*profile, t.admin, fmt.Sprintf("%s-c%d", slug(t.name), c), warmup, slice)
					}
					var s sample
					if t.plugin != nil {
						s = t.plugin(c, warmup, slice, upPid)
					} else {
						mark, fill := cpuMeter([]int{t.pid, upPid, os.Getpid()})
						s = load(t.client(c), t.url, c, warmup, slice, mark)
						fill(&s)
					}
					if saved != nil {
						saved()
					}
					samples[t.name][c].add(s)
					fmt.Fprintf(os.Stderr, "round %d  %-26s c=%-3d %8.0f req/s  errors %d\n", round+1, t.name, c,
						float64(len(s.lats))/s.dur.Seconds(), s.errors)
				}
			}
		}
	}
	measure(mainTargets, max(*rounds, 1), *duration, *warmup)
	measure(plugTargets, max(*pluginRounds, 1), *pluginDuration, *pluginWarmup)
	var pairs map[sandbox.Level]map[int][2]int
	if len(plugTargets) > 0 {
		pairs = measurePairs(plugs, cs, max(*pluginRounds, 1), *pluginDuration, *pluginWarmup, upPid)
	}
	for _, t := range targets {
		results[t.name] = map[int]result{}
		for _, c := range cs {
			results[t.name][c] = samples[t.name][c].result()
		}
	}

	names := make([]string, len(targets))
	direct := map[string]bool{}
	for i, t := range targets {
		names[i] = t.name
		direct[t.name] = t.pid == 0
	}
	report(names, cs, results, direct, pairs)
}

type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int
	cpu      [3]float64 // CPU µs per request of the proxy, the upstream and the client
	user     float64    // the proxy's share of cpu[0] in user space (the rest is the kernel's)
}

// sample is what one or more measuring windows of a cell saw.
type sample struct {
	lats   []time.Duration
	errors int
	dur    time.Duration
	cpu    [3]time.Duration
	user   time.Duration // the proxy's user-space CPU
}

func (s *sample) add(o sample) {
	s.user += o.user
	s.lats = append(s.lats, o.lats...)
	s.errors += o.errors
	s.dur += o.dur
	for i := range s.cpu {
		s.cpu[i] += o.cpu[i]
	}
}

func (s *sample) result() result {
	slices.Sort(s.lats)
	r := result{errors: s.errors}
	if n := len(s.lats); n > 0 {
		r.rps = float64(n) / s.dur.Seconds()
		r.p50 = s.lats[n/2]
		r.p99 = s.lats[min(n-1, n*99/100)]
		for i := range s.cpu {
			r.cpu[i] = float64(s.cpu[i].Microseconds()) / float64(n)
		}
		r.user = float64(s.user.Microseconds()) / float64(n)
	}
	return r
}

// load runs c workers against url: warm-up, then measure. mark is called
// when the measuring window starts (true) and ends (false).
func load(client *http.Client, u string, c int, warmup, dur time.Duration, mark func(start bool)) sample {
	var mu sync.Mutex
	var lats []time.Duration
	errors := 0
	var wg sync.WaitGroup
	startAt := time.Now().Add(warmup)
	endAt := startAt.Add(dur)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			errs := 0
			for {
				t0 := time.Now()
				if t0.After(endAt) {
					break
				}
				resp, err := client.Get(u)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if t0.Before(startAt) {
					continue
				}
				if err != nil {
					errs++
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			errors += errs
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(startAt))
	mark(true)
	time.Sleep(time.Until(endAt))
	mark(false)
	wg.Wait()
	client.CloseIdleConnections()
	return sample{lats: lats, errors: errors, dur: dur}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func joinInts(cs []int, sep, first string) string {
	var b strings.Builder
	for i, c := range cs {
		if i == 0 {
			b.WriteString(first)
		} else {
			b.WriteString(sep)
		}
		b.WriteString(strconv.Itoa(c))
	}
	return b.String()
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(addr string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	log.Fatalf("%s never listened", addr)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func path(dir, name string) string { return filepath.Join(dir, name) }
