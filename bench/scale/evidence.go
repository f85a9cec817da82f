package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/host/evidence"
)

// checkpointEvery is how many records the bench appends between signed
// checkpoints.
const checkpointEvery = 1000

// durableRecords is how many records the durable append rate is measured
// over: each is synced to disk (fsync-bound, so independent of the log's
// size), which makes a million of them take most of an hour.
const durableRecords = 2000

// benchEvidence appends n records of a typical size (an invocation's
// outcome) to a fresh log, with a signed checkpoint every 1,000, and
// measures the append rate, the bytes per record, opening the log again
// (a restart verifies the whole chain), verifying it with the key (wall
// and CPU time), and one checkpoint at that size. The curves are built
// in fast (a tmpfs, where a sync costs nothing, so the append rate is the
// CPU's ceiling); the durable rate is measured once, in dir.
func benchEvidence(ns []int, dir, fast string) {
	key, err := evidence.LoadKey(filepath.Join(dir, "evidence.key"))
	check(err)
	data, _ := json.Marshal(map[string]any{"status": "SUCCEEDED", "plugin_version": "1.4.2", "duration_ms": 184,
		"credential_fingerprints": []string{"fp-3f2a9c1e", "fp-77b0d412"}, "reason": "", "cost_micros": 1200})
	{
		path := filepath.Join(dir, "evidence-durable.jsonl")
		l, err := evidence.Open(path)
		check(err)
		start := time.Now()
		for i := range durableRecords {
			_, err := l.Append(evidence.Record{Type: "invocation.outcome", Plugin: "tickets", Invocation: "inv-" + strconv.Itoa(i), Data: data})
			check(err)
		}
		fmt.Printf("\nDurable append in %s: %.0f records/s (%d records, each synced).\n", dir, float64(durableRecords)/time.Since(start).Seconds(), durableRecords)
		check(l.Close())
		check(os.Remove(path))
	}
	fmt.Println("\n| records | append, CPU ceiling (records/s) | bytes per record | open (restart) | verify with key | verify (records/s) | verify CPU µs per record | checkpoint at this size |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	dir = fast
	keys, err := evidence.ParseJWKS(key.JWKS())
	check(err)
	for _, n := range ns {
		path := filepath.Join(dir, "evidence-"+strconv.Itoa(n)+".jsonl")
		l, err := evidence.Open(path)
		check(err)
		start := time.Now()
		for i := range n {
			_, err := l.Append(evidence.Record{Type: "invocation.outcome", Plugin: "tickets",
				Invocation: "inv-" + strconv.Itoa(i), Data: data})
			check(err)
			if (i+1)%checkpointEvery == 0 {
				_, err := l.Checkpoint(key)
				check(err)
			}
		}
		rate := float64(n) / time.Since(start).Seconds()
		_, err = l.Append(evidence.Record{Type: "invocation.outcome", Plugin: "tickets", Invocation: "last", Data: data})
		check(err)
		t0 := time.Now()
		_, err = l.Checkpoint(key)
		cp := time.Since(t0)
		check(err)
		check(l.Close())
		fi, err := os.Stat(path)
		check(err)

		t0 = time.Now()
		l, err = evidence.Open(path)
		open := time.Since(t0)
		check(err)
		check(l.Close())

		f, err := os.Open(path)
		check(err)
		t0, c0 := time.Now(), cpuSelf()
		v, err := evidence.VerifyWith(f, evidence.VerifyOptions{Keys: keys})
		verify, verifyCPU := time.Since(t0), cpuSelf()-c0
		f.Close()
		check(err)
		if v.Records < n {
			check(fmt.Errorf("verified %d of %d records", v.Records, n))
		}
		fmt.Printf("| %d | %.0f | %.0f | %s | %s | %.0f | %.1f | %s |\n", n, rate, float64(fi.Size())/float64(v.Records),
			open.Round(time.Millisecond), verify.Round(time.Millisecond), float64(v.Records)/verify.Seconds(),
			float64(verifyCPU.Nanoseconds())/1e3/float64(v.Records), cp.Round(10*time.Microsecond))
		check(os.Remove(path))
	}
}

// cpuSelf is the CPU time this process has used (every thread, the
// collector's included): on a shared machine, the cost a curve should be
// read in, as wall time also holds the other tenants' share.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
