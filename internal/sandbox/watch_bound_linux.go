package sandbox

import (
	"bytes"
	"os"
	"strconv"
)

// The PSS of a process is what a look must weigh, and reading it
// (smaps_rollup) walks every page the process maps: for an idle plugin it
// was most of the init's CPU, four times a second for the plugin's whole
// life. Its resident set (statm) is a counter, and PSS is never more
// than it, so while the resident sets and the memfds together stay well
// below the limit, no PSS can have reached it and the look skips the
// walk. It still checks that each process's PSS could be read, so a
// process that hides it is found as before.

// boundShare is the share of the memory limit under which the resident
// sets are far enough below it: the kernel's resident counters are
// per-CPU sums that may lag by a few hundred KiB.
const boundShare = 7.0 / 8

// farBelow reports whether the resident sets of ts and the memfds'
// sizes sum to less than boundShare of the memory limit (and every
// resident set could be read).
func (w *watcher) farBelow(ts []task, memfds map[[2]uint64]int64) bool {
	limit := int64(w.limits.MemoryMB) << 10 // KiB
	if limit <= 0 {
		return false
	}
	var kib int64
	for _, n := range memfds {
		kib += n >> 10
	}
	for _, t := range ts {
		n, ok := rssKiB(t.pid)
		if !ok {
			return false
		}
		kib += n
	}
	return float64(kib) < boundShare*float64(limit)
}

// rssKiB is a process's resident set in KiB from /proc/PID/statm (its
// second field, in pages).
func rssKiB(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()) >> 10, true
}

// pssReadable is pss without the walk: 0 KiB, and whether the process
// lets the init read its PSS (the permission is checked when the file is
// opened).
func pssReadable(pid int) (int64, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, !hidden(err)
	}
	f.Close()
	return 0, true
}
