// Command attacker is a malicious plugin for the escape tests: it tries
// every way around the sandbox it is told of (ATTACK_* variables) and
// prints one JSON line per attempt, {"attack", "escaped", "detail"};
// then one proxied request through HTTP_PROXY, which must succeed.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func report(attack string, escaped bool, detail string) {
	b, _ := json.Marshal(map[string]any{"attack": attack, "escaped": escaped, "detail": detail})
	fmt.Println(string(b))
}

func list(name string) []string {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func main() {
	mode := "probe"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "probe":
		probe()
	case "grandchild":
		// A grandchild in its own session that keeps stdout open and
		// outlives us, unless the sandbox kills it.
		cmd := exec.Command("/bin/sh", "-c", "exec -a airlock-escape-grandchild sleep 300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			report("grandchild", false, err.Error())
		}
		report("grandchild-started", true, "")
		os.Exit(3)
	case "forkbomb":
		for {
			cmd := exec.Command(os.Args[0], "sleep")
			if err := cmd.Start(); err != nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "load":
		load()
	case "memfd":
		// Memory no process maps: a memfd written to and never mapped.
		fd, err := unix.MemfdCreate("hog", 0)
		if err != nil {
			os.Exit(4)
		}
		f := os.NewFile(uintptr(fd), "hog")
		chunk := make([]byte, 8<<20)
		for i := range chunk {
			chunk[i] = 1
		}
		for {
			if _, err := f.Write(chunk); err != nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
	case "memfdinflight":
		// Memory in no process's descriptors: a memfd sent over a unix
		// socket and never received, then closed.
		fd, err := unix.MemfdCreate("hog", 0)
		if err != nil {
			os.Exit(4)
		}
		chunk := make([]byte, 8<<20)
		for i := range chunk {
			chunk[i] = 1
		}
		for range 24 {
			if _, err := unix.Write(fd, chunk); err != nil {
				os.Exit(5)
			}
		}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil || unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(fd), nil, 0) != nil {
			os.Exit(6)
		}
		unix.Close(fd)
		chunk = nil
		report("memfdinflight", true, "")
		time.Sleep(10 * time.Second)
	case "churn":
		// Lineages of processes that fork twice and exit at once, as
		// many as RLIMIT_NPROC lets them be: a walk that lists new ones
		// until none is new never ends. We reap the orphans (so no
		// zombie counts) and exit after a while, or are killed.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
		for range 32 {
			churn()
		}
		go func() {
			for {
				if _, err := syscall.Wait4(-1, nil, 0, nil); err == syscall.ECHILD {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		report("churn", true, strconv.Itoa(os.Getpid()))
		time.Sleep(3 * time.Second)
	case "diskfill", "diskunlinked":
		diskFill(mode == "diskunlinked")
	case "identity":
		// Who the plugin is: its status lines, and whether it may
		// drop its groups.
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "Gid:") || strings.HasPrefix(l, "Groups:") {
				fmt.Println(l)
			}
		}
	case "memhog":
		var keep [][]byte
		for {
			b := make([]byte, 8<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	}
}

// churn starts one lineage: a child that forks twice and exits, each of
// its children the same, forever. The child runs raw system calls only
// (no Go runtime after a fork).
//
//go:norace
//go:nosplit
func churn() {
	if pid, _, _ := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0); pid != 0 {
		return
	}
	pause := syscall.Timespec{Nsec: 100_000}
	for {
		pid, _, errno := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
		if errno != 0 {
			// No room yet (RLIMIT_NPROC): wait a little and go on.
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&pause)), 0, 0)
			continue
		}
		if pid == 0 {
			continue // the child goes on
		}
		if pid, _, _ := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0); pid == 0 {
			continue
		}
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
}

func probe() {
	for _, p := range list("ATTACK_READ") {
		f, err := os.Open(p)
		if err == nil {
			buf := make([]byte, 16)
			n, _ := f.Read(buf)
			f.Close()
			report("read "+p, n > 0, "")
			continue
		}
		report("read "+p, false, err.Error())
	}
	for _, p := range list("ATTACK_WRITE") {
		err := os.WriteFile(p, []byte("x"), 0o644)
		report("write "+p, err == nil, errString(err))
	}
	for _, a := range list("ATTACK_TCP") {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err == nil {
			c.Close()
		}
		report("tcp "+a, err == nil, errString(err))
	}
	for _, a := range list("ATTACK_UDP") {
		c, err := net.Dial("udp", a)
		if err == nil {
			_, err = c.Write([]byte("escape"))
			c.Close()
		}
		report("udp "+a, err == nil, errString(err))
	}
	for _, p := range list("ATTACK_UNIX") {
		c, err := net.DialTimeout("unix", p, 2*time.Second)
		if err == nil {
			c.Close()
		}
		report("unix "+p, err == nil, errString(err))
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err == nil {
		syscall.Close(fd)
	}
	report("raw socket", err == nil, errString(err))
	if pid, err := strconv.Atoi(os.Getenv("ATTACK_PID")); err == nil {
		b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		report("host environ", rerr == nil && len(b) > 0, errString(rerr))
		serr := syscall.Kill(pid, 0)
		report("signal host", serr == nil, errString(serr))
		perr := syscall.PtraceAttach(pid)
		report("ptrace host", perr == nil, errString(perr))
	}
	for _, a := range list("ATTACK_TCP") {
		// MPTCP (protocol 262) and TCP Fast Open connect without the
		// connect(2) Landlock's TCP rules see.
		host, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		sa := &syscall.SockaddrInet4{Port: p}
		copy(sa.Addr[:], net.ParseIP(host).To4())
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 262)
		if err == nil {
			err = syscall.Connect(fd, sa)
			syscall.Close(fd)
		}
		report("mptcp "+a, err == nil, errString(err))
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err == nil {
			err = syscall.Sendto(fd, []byte("escape"), 0x20000000, sa)
			syscall.Close(fd)
		}
		report("fastopen "+a, err == nil, errString(err))
	}
	// The init's descriptors (its control socket, the spec pipe) must not
	// reach the plugin: a control socket would let it forge the init's
	// reports.
	inherited := ""
	for fd := 3; fd < 64; fd++ {
		if typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE); err == nil && typ == syscall.SOCK_SEQPACKET {
			inherited = strconv.Itoa(fd)
		}
	}
	report("inherited control socket", inherited != "", inherited)
	// The init must not be the plugin's to kill (it sweeps what the
	// plugin leaves): at the namespaces level it is pid 1 of the plugin's
	// namespace, which its own processes cannot kill.
	if os.Getenv("ATTACK_NS") == "" {
		err := syscall.Kill(os.Getppid(), 0)
		report("signal init", err == nil, errString(err))
	}
	if err := syscall.Unshare(syscall.CLONE_NEWUSER); err == nil {
		report("new user namespace", true, "")
	} else {
		report("new user namespace", false, err.Error())
	}
	// The one way out: the egress proxy.
	resp, err := http.Get(os.Getenv("ATTACK_PROXIED"))
	if err != nil {
		report("proxied", false, err.Error())
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	report("proxied", resp.StatusCode == 200 && strings.Contains(string(body), "proxied"), strconv.Itoa(resp.StatusCode))
}

// load sends ATTACK_N requests to ATTACK_PROXIED through HTTP_PROXY, 16
// at a time over kept-alive connections (the relay benchmark).
func load() {
	n, _ := strconv.Atoi(os.Getenv("ATTACK_N"))
	url := os.Getenv("ATTACK_PROXIED")
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16}
	client := &http.Client{Transport: tr}
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	done := make(chan bool, 16)
	for range 16 {
		go func() {
			ok := true
			for range jobs {
				resp, err := client.Get(url)
				if err != nil {
					ok = false
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- ok
		}()
	}
	for range 16 {
		if !<-done {
			os.Exit(1)
		}
	}
}

// diskFill writes 4 MiB files, each far below any file size bound, round
// robin into the directories of ATTACK_DISK ("TMPDIR": its own) until it
// has written ATTACK_DISK_MB in all, then waits to be killed (a minute
// at most). A directory whose filesystem is full is left out; with all
// of them full it exits 4. unlinked: each file is deleted once written
// and kept open.
func diskFill(unlinked bool) {
	var dirs []string
	for _, d := range list("ATTACK_DISK") {
		if d == "TMPDIR" {
			d = os.TempDir()
		}
		dirs = append(dirs, d)
	}
	total, _ := strconv.Atoi(os.Getenv("ATTACK_DISK_MB"))
	chunk := make([]byte, 4<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	var keep []*os.File
	for i := 0; i*4 < total; i++ {
		if len(dirs) == 0 {
			report("diskfill", false, "every directory is full")
			os.Exit(4)
		}
		d := dirs[i%len(dirs)]
		f, err := os.Create(fmt.Sprintf("%s/fill-%d", d, i))
		if err == nil {
			_, err = f.Write(chunk)
		}
		if err != nil {
			dirs = slices.DeleteFunc(dirs, func(x string) bool { return x == d })
			if f != nil {
				f.Close()
			}
			continue
		}
		if unlinked {
			_ = os.Remove(f.Name())
			keep = append(keep, f)
		} else {
			f.Close()
		}
	}
	report("diskfill", true, strconv.Itoa(len(keep)))
	time.Sleep(time.Minute)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
