package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// confineAndStart confines this thread — Landlock (landlock level),
// no_new_privs, seccomp, no capabilities — and starts the plugin from it,
// so the plugin inherits all of it; the exec stage adds the rlimits and
// the CPU priority.
func (ip *initProc) confineAndStart() (*os.Process, error) {
	s := &ip.spec
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Landlock is built here and applied by the exec stage to itself, so
	// that the init stays outside the plugin's domain: the domain's
	// signal scope then keeps the plugin from killing its init (which
	// would leave its descendants unswept).
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	ruleset := -1
	if s.Level == LevelLandlock {
		fd, err := landlockRuleset(s)
		if err != nil {
			return nil, err
		}
		rf := os.NewFile(uintptr(fd), "landlock-ruleset")
		defer rf.Close()
		files = append(files, rf)
		ruleset = len(files) - 1
	}
	// Nothing of the init's but what is handed over reaches the plugin:
	// its control socket and spec pipe, and whatever the host inherited,
	// are closed at exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("marking descriptors close-on-exec: %w", err)
	}
	// A root host: the plugin gets its own uid and gid and no
	// supplementary group, which drops every capability as they are set;
	// at the landlock level the exec stage sets them, after reading this
	// binary as root.
	setUID := -1
	if os.Getuid() == 0 {
		if s.UID <= 0 {
			return nil, fmt.Errorf("a root host gave the plugin no uid of its own")
		}
		if s.Level == LevelLandlock {
			setUID = s.UID
		} else {
			// Groups empty: os.StartProcess calls setgroups(0).
			attr.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.UID), Groups: []uint32{}}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ip.installSeccomp(); err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if attr.Credential == nil && setUID < 0 {
		if err := dropCaps(); err != nil {
			return nil, fmt.Errorf("dropping capabilities: %w", err)
		}
	}
	// The plugin starts through an exec stage (this binary again) that
	// sets RLIMIT_NPROC on itself and executes the plugin: a limit set
	// here would count the init's own threads, and the init could not
	// start one more once a fork bomb filled it.
	argv := append([]string{"airlock-sandbox", initArg, "exec", strconv.Itoa(setUID), ip.limits, strconv.Itoa(ruleset), s.Path}, s.Args...)
	proc, err := os.StartProcess("/proc/self/exe", argv, &os.ProcAttr{
		Dir: s.Dir, Env: s.Env, Files: files, Sys: attr})
	if err != nil && attr.Credential != nil && errors.Is(err, os.ErrPermission) {
		// The exec stage is this binary, run as the plugin's uid.
		exe, _ := os.Readlink("/proc/self/exe")
		return nil, fmt.Errorf("the plugin's uid %d cannot execute the airlock binary %s, which starts every sandboxed plugin "+
			"(make it and each directory above it executable by all users): %w", s.UID, exe, err)
	}
	return proc, err
}

// execMain is the exec stage: argv is the uid to become (-1: none), the
// limits (encodeLimits), the Landlock ruleset's descriptor (-1: none),
// path, args. The limits and the ruleset are applied last, just before
// the plugin is executed: they bound the plugin, not the stage (nor the
// init, which a plugin at its limit must not starve, nor signal).
func execMain(argv []string) int {
	if len(argv) < 4 {
		return 127
	}
	uid, err := strconv.Atoi(argv[0])
	limits, lerr := decodeLimits(argv[1])
	ruleset, rerr := strconv.Atoi(argv[2])
	if err != nil || lerr != nil || rerr != nil {
		return 127
	}
	argv = argv[1:] // path at argv[2], as before the ruleset was added
	initPid := os.Getppid()
	confine := func() error {
		if err := applyLimits(limits); err != nil {
			return err
		}
		if ruleset >= 0 {
			if err := landlockRestrictFD(ruleset); err != nil {
				return err
			}
			unix.Close(ruleset)
		}
		return nil
	}
	if uid >= 0 {
		// Open the program while still root: its directory (a package
		// in the owner-only state directory) need not be traversable by
		// the plugin's uid, only the program executable.
		fd, err := unix.Open(argv[2], unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "airlock sandbox: opening the plugin's program:", err)
			return 127
		}
		if err := becomeUser(uid); err != nil {
			fmt.Fprintln(os.Stderr, "airlock sandbox: dropping to the plugin's uid:", err)
			return 127
		}
		// A uid change clears the death signal: set it again, so the
		// plugin dies with its init, and make sure the init is still
		// there to have sent it.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil || os.Getppid() != initPid {
			return 127
		}
		if err := confine(); err != nil {
			fmt.Fprintln(os.Stderr, "airlock sandbox:", err)
			return 127
		}
		err = execveat(fd, argv[2:], os.Environ())
		fmt.Fprintf(os.Stderr, "airlock sandbox: the plugin's uid %d cannot execute the plugin's program %s: %v\n", uid, argv[2], err)
		return 127
	}
	if err := confine(); err != nil {
		fmt.Fprintln(os.Stderr, "airlock sandbox:", err)
		return 127
	}
	err = syscall.Exec(argv[2], argv[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "airlock sandbox: uid %d cannot execute the plugin's program %s: %v\n", os.Getuid(), argv[2], err)
	return 127
}

// execveat executes the program open at fd.
func execveat(fd int, argv, env []string) error {
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	av, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	ev, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	_, _, e := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&av[0])), uintptr(unsafe.Pointer(&ev[0])), unix.AT_EMPTY_PATH, 0)
	return e
}

// becomeUser drops every group and becomes uid (gid the same), which
// also clears every capability.
func becomeUser(uid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setgid(uid); err != nil {
		return err
	}
	return syscall.Setuid(uid)
}

// dropCaps empties this thread's capability sets, ambient included.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// rlimit is one resource limit of the plugin.
type rlimit struct {
	res int
	val uint64
}

// limitValues are the plugin's per-process limits, backstops behind the
// watcher, which enforces the plugin-wide ones exactly. RLIMIT_DATA is
// twice the memory limit and 256 MiB more, so that a plugin reaches the
// watched limit (and is reported for it) first, as a runtime maps more
// than it touches. RLIMIT_NPROC counts every process of the uid in its
// user namespace: at the landlock level those the uid has already (an
// unprivileged host's own), so their count now is added, and the init's
// threads at every level.
func limitValues(s *initSpec) []rlimit {
	l := s.Limits
	nproc := l.Processes + initThreads()
	if s.Level == LevelLandlock {
		// The uid's own processes: a root host's plugin's alone (its
		// uid is its own), an unprivileged host's all of them.
		uid := os.Getuid()
		if s.UID > 0 {
			uid = s.UID
		}
		nproc += uidThreads(uid)
	}
	backstop := 2*(uint64(l.MemoryMB)<<20) + 256<<20
	// RLIMIT_FSIZE bounds each file the plugin writes — a memfd, which
	// is memory, as much as a file in its private directory — between
	// two of the watcher's looks.
	out := []rlimit{{unix.RLIMIT_DATA, backstop}, {unix.RLIMIT_FSIZE, fileBound(l)}, {unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{unix.RLIMIT_NPROC, uint64(nproc)}, {unix.RLIMIT_CORE, 0}}
	if l.Nice != nil && *l.Nice > 0 {
		out = append(out, rlimit{niceRes, uint64(*l.Nice)})
	}
	return out
}

// niceRes stands for the CPU priority among the rlimits the exec stage
// applies: the plugin gets it there, and not the init's thread it is
// forked from, which runs the watcher and the sweep and must not be
// slowed to a busy plugin's priority.
const niceRes = -1

// encodeLimits is the exec stage's argument: "res=val,…".
func encodeLimits(ls []rlimit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = strconv.Itoa(l.res) + "=" + strconv.FormatUint(l.val, 10)
	}
	return strings.Join(parts, ",")
}

func decodeLimits(s string) ([]rlimit, error) {
	var out []rlimit
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		res, err1 := strconv.Atoi(k)
		val, err2 := strconv.ParseUint(v, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad limit %q", p)
		}
		out = append(out, rlimit{res, val})
	}
	return out, nil
}

// applyLimits lowers each limit to its value (never raises one the host
// already set lower).
func applyLimits(ls []rlimit) error {
	for _, l := range ls {
		if l.res == niceRes {
			// PRIO_PROCESS with who 0 is this thread on Linux; the
			// plugin's program runs on it after exec.
			if err := unix.Setpriority(unix.PRIO_PROCESS, 0, int(l.val)); err != nil {
				return fmt.Errorf("setting the CPU priority: %w", err)
			}
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.res, &cur); err != nil {
			return err
		}
		v := min(l.val, cur.Max)
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("limit %d: %w", l.res, err)
		}
	}
	return nil
}

// uidThreads counts the threads of uid's processes, from /proc.
func uidThreads(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		var st unix.Stat_t
		if e.Name()[0] < '0' || e.Name()[0] > '9' || unix.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != uid {
			continue
		}
		if ts, err := os.ReadDir("/proc/" + e.Name() + "/task"); err == nil {
			n += len(ts)
		}
	}
	return n
}

// initThreads counts the init's threads, with room for a few more.
func initThreads() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 32
	}
	return len(ents) + 16
}
