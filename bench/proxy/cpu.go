package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTime is a process's user plus system CPU time so far (Linux; zero
// elsewhere).
func cpuTime(pid int) time.Duration {
	u, s := cpuTimes(pid)
	return u + s
}

// cpuTimes is a process's user and system CPU time so far.
func cpuTimes(pid int) (user, sys time.Duration) {
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = time.Second / 100 // USER_HZ is 100 on Linux
	return time.Duration(ut) * tick, time.Duration(st) * tick
}

// cpuMeter measures the CPU time of pids over a window (a negative pid:
// that process and its descendants), and the user-space part of the
// first's (the proxy's): mark starts and ends it, fill writes it into a
// sample.
func cpuMeter(pids []int) (mark func(start bool), fill func(*sample)) {
	var cpu0, cpu1 [3]time.Duration
	var user0, user1 time.Duration
	mark = func(start bool) {
		if u, _ := cpuTimes(pids[0]); start {
			user0 = u
		} else {
			user1 = u
		}
		for i, p := range pids {
			t := cpuTime(p)
			if p < 0 { // a process tree
				t = treeCPU(-p)
			}
			if start {
				cpu0[i] = t
			} else {
				cpu1[i] = t
			}
		}
	}
	fill = func(s *sample) {
		for i := range pids {
			s.cpu[i] = cpu1[i] - cpu0[i]
		}
		s.user = user1 - user0
	}
	return mark, fill
}
