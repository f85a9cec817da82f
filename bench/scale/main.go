// Command scale measures how Airlock's costs grow with the size of what it
// holds, each as a curve over at least three sizes (docs/benchmarks.md,
// "Scale"): the handle store (memory and Redis) at 10k / 100k / 1M live
// handles, the evidence log at 10k / 100k / 1M records, and one host with
// 10 / 50 / 200 sandboxed plugins of each kind. It prints one
// Markdown table per part. (The serve binary with 1k / 5k / 10k open
// tunnels and WebSockets is bench/proxy's -conns; `make bench-scale` runs
// both.)
//
//	go run ./bench/scale -redis-server "$(command -v redis-server)"
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

func main() {
	sandbox.Init() // the plugins' sandboxes start through a re-executed copy of this program
	only := flag.String("only", "handles,evidence,plugins", "parts to measure (comma-separated)")
	handleSizes := flag.String("handles", "10000,100000,1000000", "live handle counts")
	recordSizes := flag.String("records", "10000,100000,1000000", "evidence record counts")
	pluginSizes := flag.String("plugins", "10,50,200", "sandboxed plugins per host")
	redisServer := flag.String("redis-server", "", "a redis-server binary: also measure the Redis store (skipped when empty)")
	dir := flag.String("dir", "", "a directory on the disk the evidence log would live on (default: a temporary one)")
	fast := flag.String("fast-dir", "/dev/shm", "a tmpfs directory the evidence curves are built in")
	flag.Parse()
	parts := strings.Split(*only, ",")
	work := *dir
	if work == "" {
		var err error
		work, err = os.MkdirTemp("", "airlock-scale-")
		check(err)
		defer os.RemoveAll(work)
	}
	if slices.Contains(parts, "handles") {
		benchHandles(sizes(*handleSizes), *redisServer)
	}
	if slices.Contains(parts, "evidence") {
		f, err := os.MkdirTemp(*fast, "airlock-scale-")
		check(err)
		defer os.RemoveAll(f)
		benchEvidence(sizes(*recordSizes), work, f)
	}
	if slices.Contains(parts, "plugins") {
		benchPlugins(sizes(*pluginSizes), work)
	}
}

func sizes(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		check(err)
		out = append(out, n)
	}
	return out
}

// quantiles returns the median and the 99th percentile of ds.
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}
