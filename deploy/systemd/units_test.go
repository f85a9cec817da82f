package systemd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// The shipped units, run as systemd would run them — each command as its
// unit's user, group and umask, with the state, runtime and tmpfiles
// directories made as systemd makes them, in a scratch root that stands
// for / — survive every step of a machine's life: first start, the host
// running beside serve, rotations run as root, a serve restart, a host
// restart, and a reboot (/run emptied, /var/lib kept). systemd itself is
// not needed: the test reads the unit files and does what they say.
func TestUnitsSurviveRestartsAndReboot(t *testing.T) {
	testenv.NeedsRoot(t, "it creates the units' users and runs their commands as them")
	serve := parseUnit(t, "airlock-serve.service")
	host := parseUnit(t, "airlock-host.service")
	m := newMachine(t, parseSysusers(t, "airlock.sysusers"), parseTmpfiles(t, "airlock.tmpfiles"))

	m.step("first start", func() {
		m.boot()
		m.start(serve, "airlock serving")
		m.start(host, "airlock host running")
		m.assertOwner("/var/lib/airlock-broker/signing-keys.pem", "airlock-broker", 0o600)
		m.assertOwner("/var/lib/airlock-broker/intercept-ca.key", "airlock-broker", 0o600)
		m.assertReadableBy("/var/lib/airlock/intercept-ca.pem", host)
		m.assertReadableBy("/run/airlock/broker.token", host)
	})
	m.step("rotations run as root", func() {
		m.runAsRoot("token", "rotate")
		m.runAsRoot("intercept-ca", "stage")
		m.assertOwner("/var/lib/airlock-broker/signing-keys.pem", "airlock-broker", 0o600)
		m.assertOwner("/var/lib/airlock-broker/intercept-ca.key", "airlock-broker", 0o600)
		m.assertOwner("/var/lib/airlock-broker/intercept-ca.key.next", "airlock-broker", 0o600)
	})
	m.step("serve restart with the host running", func() {
		m.stop(serve)
		m.start(serve, "airlock serving")
		m.assertRunning(host)
	})
	m.step("host restart", func() {
		m.stop(host)
		m.start(host, "airlock host running")
	})
	bundle := m.read("/var/lib/airlock/intercept-ca.pem")
	m.step("reboot", func() {
		m.stop(host)
		m.stop(serve)
		m.emptyRun()
		m.boot()
		m.start(serve, "airlock serving")
		m.start(host, "airlock host running")
		if got := m.read("/var/lib/airlock/intercept-ca.pem"); !bytes.Equal(got, bundle) {
			t.Error("the intercept CA bundle changed across the reboot: plugins' trust would break")
		}
	})
}

// machine is a scratch root standing for /, and the units' processes.
type machine struct {
	t        *testing.T
	root     string
	bin      string
	cfg      string
	users    sysusers
	tmpfiles []tmpfile
	running  map[string]*process
}

type process struct {
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan error
}

func newMachine(t *testing.T, users sysusers, tmpfiles []tmpfile) *machine {
	// Short: unix socket paths under it must stay below 108 bytes.
	root, err := os.MkdirTemp("", "al-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &machine{t: t, root: root, users: users, tmpfiles: tmpfiles, running: map[string]*process{}}
	t.Cleanup(func() {
		for _, p := range m.running {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		os.RemoveAll(root)
	})
	ensureUsers(t, users)
	for _, d := range []string{"usr/local/bin", "etc/airlock", "var/lib", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.bin = filepath.Join(root, "usr/local/bin/airlock")
	// A link to the binary TestMain built: the same inode, so the units'
	// users may run it (Binaries' directory is world-readable).
	if err := os.Link(airlockBin, m.bin); err != nil {
		t.Fatal(err)
	}
	m.cfg = filepath.Join(root, "etc/airlock/airlock.yaml")
	m.writeConfig()
	return m
}

// path maps an absolute path of the real machine into the scratch root.
func (m *machine) path(p string) string { return filepath.Join(m.root, p) }

// rewrite points the well-known paths of the shipped files into the root.
func (m *machine) rewrite(s string) string {
	r := strings.NewReplacer("/usr/local/bin/airlock", m.bin, "/etc/airlock/", m.path("/etc/airlock")+"/",
		"/var/lib/", m.path("/var/lib")+"/", "/run/", m.path("/run")+"/")
	return r.Replace(s)
}

// writeConfig installs the shipped airlock.yaml, its paths in the root and
// its listeners on free ports (tests never take a fixed port).
func (m *machine) writeConfig() {
	b, err := os.ReadFile("airlock.yaml")
	if err != nil {
		m.t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(m.rewrite(string(b))), &doc); err != nil {
		m.t.Fatal(err)
	}
	section := func(k string) map[string]any {
		if s, ok := doc[k].(map[string]any); ok {
			return s
		}
		s := map[string]any{}
		doc[k] = s
		return s
	}
	section("admin")["listen"] = testenv.FreeAddr(m.t)
	section("proxy")["listen"] = testenv.FreeAddr(m.t)
	section("host")["admin"] = testenv.FreeAddr(m.t)
	out, err := yaml.Marshal(doc)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(m.cfg, out, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) step(name string, f func()) {
	m.t.Helper()
	if m.t.Failed() {
		return
	}
	m.t.Logf("step: %s", name)
	f()
	if m.t.Failed() {
		m.t.Fatalf("step %q failed", name)
	}
}

// boot does what systemd-tmpfiles does at boot: the tmpfiles directories.
func (m *machine) boot() {
	for _, d := range m.tmpfiles {
		p := m.path(d.path)
		if err := os.MkdirAll(p, d.mode); err != nil {
			m.t.Fatal(err)
		}
		m.own(p, d.user, d.group, d.mode)
	}
}

// emptyRun is a reboot's /run: a fresh tmpfs.
func (m *machine) emptyRun() {
	if err := os.RemoveAll(m.path("/run")); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Mkdir(m.path("/run"), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) own(p, userName, group string, mode os.FileMode) {
	uid, gid := lookupUser(m.t, userName)
	if group != "" && group != "-" {
		gid = lookupGroup(m.t, group)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		m.t.Fatal(err)
	}
}

// credential is the unit's user, group and supplementary groups (the
// user's own from the group database, as initgroups, and the unit's).
func (m *machine) credential(u unit) *syscall.Credential {
	uid, gid := lookupUser(m.t, u.user)
	if u.group != "" {
		gid = lookupGroup(m.t, u.group)
	}
	usr, err := user.Lookup(u.user)
	if err != nil {
		m.t.Fatal(err)
	}
	ids, _ := usr.GroupIds()
	var groups []uint32
	for _, g := range ids {
		n, _ := strconv.Atoi(g)
		groups = append(groups, uint32(n))
	}
	for _, g := range u.supplementary {
		groups = append(groups, uint32(lookupGroup(m.t, g)))
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}
}

// command is argv run as u would run it: its credential and umask, a
// clean environment.
func (m *machine) command(u unit, argv []string) *exec.Cmd {
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = m.rewrite(a)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf("umask %04o && exec \"$@\"", u.umask), "sh"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "LANG=C"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(u), Setpgid: true}
	return cmd
}

// start makes u's directories as systemd does, runs its ExecStartPre
// commands (each must succeed), then ExecStart, and waits for ready.
func (m *machine) start(u unit, ready string) {
	m.t.Helper()
	for _, d := range u.stateDirs {
		p := m.path("/var/lib/" + d)
		if err := os.MkdirAll(p, u.stateMode); err != nil {
			m.t.Fatal(err)
		}
		m.own(p, u.user, u.group, u.stateMode)
	}
	for _, d := range u.runtimeDirs {
		p := m.path("/run/" + d)
		if err := os.MkdirAll(p, u.runtimeMode); err != nil {
			m.t.Fatal(err)
		}
		m.own(p, u.user, u.group, u.runtimeMode)
	}
	for _, pre := range u.execStartPre {
		if out, err := m.command(u, pre).CombinedOutput(); err != nil {
			m.t.Fatalf("%s: ExecStartPre %s as %s: %v\n%s", u.name, strings.Join(pre, " "), u.user, err, out)
		}
	}
	cmd := m.command(u, u.execStart)
	p := &process{cmd: cmd, out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	pr, pw, err := os.Pipe()
	if err != nil {
		m.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	pw.Close()
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			if !seen && strings.Contains(sc.Text(), `"msg":"`+ready+`"`) {
				seen = true
				close(readyc)
			}
		}
		pr.Close()
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case <-readyc:
	case err := <-p.done:
		m.t.Fatalf("%s exited before it was ready: %v\n%s", u.name, err, p.out)
	case <-time.After(3 * time.Minute): // generous: a loaded 2-core machine
		m.t.Fatalf("%s not ready after 3 minutes\n%s", u.name, p.out)
	}
	m.running[u.name] = p
}

// stop is systemctl stop: SIGTERM, wait, and the runtime directories go
// unless preserved.
func (m *machine) stop(u unit) {
	m.t.Helper()
	p := m.running[u.name]
	if p == nil {
		m.t.Fatalf("%s is not running", u.name)
	}
	delete(m.running, u.name)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			m.t.Errorf("%s stopped with %v\n%s", u.name, err, p.out)
		}
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		m.t.Fatalf("%s did not stop on SIGTERM\n%s", u.name, p.out)
	}
	if !u.runtimePreserve {
		for _, d := range u.runtimeDirs {
			os.RemoveAll(m.path("/run/" + d))
		}
	}
}

func (m *machine) assertRunning(u unit) {
	m.t.Helper()
	p := m.running[u.name]
	select {
	case err := <-p.done:
		m.t.Fatalf("%s exited: %v\n%s", u.name, err, p.out)
	default:
	}
}

// runAsRoot runs an airlock command as root, as an operator would.
func (m *machine) runAsRoot(args ...string) {
	m.t.Helper()
	out, err := exec.Command(m.bin, append(args, "--config", m.cfg)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("airlock %s as root: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (m *machine) assertOwner(p, userName string, mode os.FileMode) {
	m.t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(m.path(p), &st); err != nil {
		m.t.Errorf("%s: %v", p, err)
		return
	}
	uid, _ := lookupUser(m.t, userName)
	if int(st.Uid) != uid || os.FileMode(st.Mode).Perm() != mode {
		m.t.Errorf("%s: uid %d mode %#o, want %s (%d) %#o", p, st.Uid, os.FileMode(st.Mode).Perm(), userName, uid, mode)
	}
}

// assertReadableBy: u's user can read p (through its groups).
func (m *machine) assertReadableBy(p string, u unit) {
	m.t.Helper()
	if out, err := m.command(u, []string{"/bin/cat", p}).CombinedOutput(); err != nil {
		m.t.Errorf("%s cannot read %s: %v %s", u.user, p, err, out)
	}
}

func (m *machine) read(p string) []byte {
	b, err := os.ReadFile(m.path(p))
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

// ensureUsers creates what the sysusers file declares, as
// systemd-sysusers would, when the machine lacks it; created ones are
// removed at the end.
func ensureUsers(t *testing.T, s sysusers) {
	t.Helper()
	run := func(argv ...string) {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	var created []string
	for _, g := range s.groups {
		if _, err := user.LookupGroup(g); err != nil {
			run("groupadd", "--system", g)
			t.Cleanup(func() { _ = exec.Command("groupdel", g).Run() })
		}
	}
	for _, u := range s.order {
		if _, err := user.Lookup(u); err == nil {
			continue
		}
		args := []string{"useradd", "--system", "--no-create-home", "--home-dir", "/", "--shell", "/usr/sbin/nologin"}
		if g := s.users[u]; g != "" {
			args = append(args, "--gid", g)
		} else {
			args = append(args, "--user-group")
		}
		run(append(args, u)...)
		created = append(created, u)
	}
	for u, groups := range s.members {
		run("usermod", "--append", "--groups", strings.Join(groups, ","), u)
	}
	t.Cleanup(func() {
		for _, u := range created {
			_ = exec.Command("userdel", u).Run()
		}
	})
}

func lookupUser(t *testing.T, name string) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

func lookupGroup(t *testing.T, name string) int {
	t.Helper()
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(g.Gid)
	return n
}
