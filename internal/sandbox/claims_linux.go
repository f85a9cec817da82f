package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// How a root host claims a plugin's uid (after systemd's dynamic users
// and Android's per-app uids):
//
//	DIR/.lock    held (flock) while a host picks, so that two hosts never
//	             pick at once
//	DIR/<uid>    one claim: {"owner", "plugin"}, held (flock) by the host
//	             that runs the plugin, for as long as that host lives
//
// DIR is machine-wide (DefaultClaimsDir), so every host of the machine
// sees every claim. A host asks for a uid once per plugin name and keeps
// the claim open until it exits, however it exits: the kernel then
// drops the lock, and the claim is free. The file stays, naming its
// owner (the host's state directory) and plugin, so that:
//
//   - the same host, restarted, finds the claim naming it and the plugin,
//     free, and takes the same uid again;
//   - another host never takes a held claim, and takes a free claim of
//     someone else's only once every uid of the range has been claimed
//     at least once (so that a host that is down for a while still finds
//     its uids on return, unless the range is too small);
//   - a uid is new only where no claim file exists, no user or group of
//     the system has it, no process runs as it, no System V IPC object is
//     its, and — inside systemd's dynamic range — systemd does not hold
//     it. A host then also holds systemd's lock on it, so that systemd
//     never gives it to a DynamicUser= service while a plugin runs as it.
//
// A new uid is searched from a hash of owner and plugin (so that a
// plugin's uid is usually the same even after its claims directory is
// lost, as /run is at a reboot), then upward through the range.

// claimed are the claims this process holds. The files stay open (their
// locks held) until the process exits.
var claimed = struct {
	sync.Mutex
	m map[claimKey]*claim
}{m: map[claimKey]*claim{}}

type claimKey struct{ dir, owner, name string }

type claim struct {
	uid   int
	files []*os.File // kept referenced: a collected *os.File closes
}

// claimRecord is a claim file's content.
type claimRecord struct {
	Owner  string `json:"owner"`
	Plugin string `json:"plugin"`
}

// systemd's dynamic users: the range, and where it locks the uids it
// hands out (a variable for tests).
const systemdFirst, systemdLast = 61184, 65519

var systemdDir = "/run/systemd/dynamic-uid"

// claimUID returns the uid plugin name of owner holds in dir, claiming
// one in r on first use.
func claimUID(dir, owner, name string, r UIDRange) (int, error) {
	claimed.Lock()
	defer claimed.Unlock()
	k := claimKey{dir, owner, name}
	if c, ok := claimed.m[k]; ok {
		return c.uid, nil
	}
	c, err := pick(dir, claimRecord{Owner: owner, Plugin: name}, r)
	if err != nil {
		return 0, err
	}
	claimed.m[k] = c
	return c.uid, nil
}

// pick claims a uid for rec in dir: its own free claim, else a uid never
// claimed, else a free claim of someone else's.
func pick(dir string, rec claimRecord, r UIDRange) (*claim, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: the uid claims directory: %w", ErrSetup, err)
	}
	if err := fsutil.CheckOwnDir(dir); err != nil {
		return nil, fmt.Errorf("%w: the uid claims directory: %w", ErrSetup, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: the uid claims lock: %w", ErrSetup, err)
	}
	defer lock.Close() // unlocks
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("%w: the uid claims lock: %w", ErrSetup, err)
	}
	existing, err := claimFiles(dir, r)
	if err != nil {
		return nil, fmt.Errorf("%w: the uid claims directory: %w", ErrSetup, err)
	}
	system, err := systemIDs()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the system's users and groups: %w", ErrSetup, err)
	}
	known := func(uid int) bool { _, ok := system[uid]; return ok }
	want, _ := json.Marshal(rec)
	// Its own claim from before: the same host, restarted.
	for uid, got := range existing {
		if bytes.Equal(got, want) && !known(uid) {
			if c := take(dir, uid, nil); c != nil {
				return c, nil
			}
		}
	}
	inUse := usedIDs()
	order := probeOrder(rec, r)
	for _, uid := range order {
		if _, ok := existing[uid]; ok || inUse[uid] || known(uid) {
			continue
		}
		if c := take(dir, uid, want); c != nil {
			return c, nil
		}
	}
	// Every uid has been claimed once: a claim nobody holds.
	for _, uid := range order {
		if _, ok := existing[uid]; !ok || inUse[uid] || known(uid) {
			continue
		}
		if c := take(dir, uid, want); c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w (%d from %d): plugins of the machine's hosts hold them, or users, groups or processes of the system have them; widen host.sandbox.uid_range", ErrNoUID, r.Count, r.First)
}

// take locks uid's claim in dir (and systemd's lock on it, inside its
// range) and writes rec there when not nil; nil when someone holds either.
func take(dir string, uid int, rec []byte) *claim {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil
	}
	if fsutil.TryLock(f) != nil {
		f.Close()
		return nil
	}
	c := &claim{uid: uid, files: []*os.File{f}}
	if uid >= systemdFirst && uid <= systemdLast {
		if fi, err := os.Stat(systemdDir); err == nil && fi.IsDir() {
			// The way systemd's pick_uid locks a dynamic uid, which
			// then skips one that is locked.
			s, err := os.OpenFile(filepath.Join(systemdDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err != nil {
				f.Close()
				return nil
			}
			if fsutil.TryLock(s) != nil {
				s.Close()
				f.Close()
				return nil
			}
			c.files = append(c.files, s)
		}
	}
	if rec != nil {
		if f.Truncate(0) != nil {
			c.release()
			return nil
		}
		if _, err := f.WriteAt(append(rec, '\n'), 0); err != nil {
			c.release()
			return nil
		}
	}
	return c
}

func (c *claim) release() {
	for _, f := range c.files {
		f.Close()
	}
}

// claimFiles reads the claims in dir that lie in r, by uid.
func claimFiles(dir string, r UIDRange) (map[int][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int][]byte{}
	for _, e := range ents {
		uid, err := strconv.Atoi(e.Name())
		if err != nil || strconv.Itoa(uid) != e.Name() || !r.Contains(uid) || !e.Type().IsRegular() {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[uid] = bytes.TrimSpace(b)
	}
	return out, nil
}

// probeOrder is every uid of r, from the one rec's hash names upward,
// wrapping around.
func probeOrder(rec claimRecord, r UIDRange) []int {
	sum := sha256.Sum256([]byte(rec.Owner + "\x00" + rec.Plugin))
	start := int(binary.BigEndian.Uint64(sum[:8]) % uint64(r.Count))
	out := make([]int, r.Count)
	for i := range out {
		out[i] = r.First + (start+i)%r.Count
	}
	return out
}

// usedIDs are the uids and gids some process runs as (any of real,
// effective, saved and filesystem ids) or some System V IPC object
// belongs to or was made by: a uid that holds either is someone's.
func usedIDs() map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				addIDs(out, strings.Fields(rest))
			} else if rest, ok := strings.CutPrefix(line, "Gid:"); ok {
				addIDs(out, strings.Fields(rest))
			}
		}
	}
	for _, f := range []string{"shm", "msg", "sem"} {
		ipcOwners(out, "/proc/sysvipc/"+f)
	}
	return out
}

func addIDs(m map[int]bool, fields []string) {
	for _, f := range fields {
		if id, err := strconv.Atoi(f); err == nil {
			m[id] = true
		}
	}
}

// ipcOwners adds the uid, cuid, gid and cgid columns of a /proc/sysvipc
// table.
func ipcOwners(m map[int]bool, name string) {
	b, err := os.ReadFile(name)
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) == 0 {
		return
	}
	var cols []int
	for i, h := range strings.Fields(lines[0]) {
		switch h {
		case "uid", "cuid", "gid", "cgid":
			cols = append(cols, i)
		}
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		for _, c := range cols {
			if c < len(f) {
				addIDs(m, f[c:c+1])
			}
		}
	}
}
