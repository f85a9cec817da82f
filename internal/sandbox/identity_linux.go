package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A root host runs each plugin under a uid and gid of its own, taken
// from host.sandbox.uid_range, so that the kernel keeps plugins apart as
// it keeps users apart: one plugin's private directory, sockets,
// processes and System V IPC objects are another user's to the next.
// The uid is the same for a plugin name across restarts of its host, and
// different for the same name on two hosts of one machine. How a uid is
// claimed is in claims_linux.go.
//
// An unprivileged host cannot give a plugin an identity of its own: it
// may map only its own uid into a user namespace, so its plugins run as
// its uid (a distinct uid inside the namespace would be a name only), and
// it cannot drop its supplementary groups (a user namespace it creates
// must deny setgroups). docs/sandbox.md says what that leaves open.

// The default uid range is the top of the range systemd keeps for dynamic
// service users (61184–65519, docs/UIDS-GIDS.md of systemd): no static
// user of a distribution lives there, and the uids systemd hands out
// there are locked the way it locks them, so that neither takes one the
// other holds.
const (
	DefaultUIDFirst = 63488
	DefaultUIDCount = 2032
	// DefaultClaimsDir holds every root host's uid claims on a machine.
	DefaultClaimsDir = "/run/airlock-uids"
)

// maxUIDCount bounds the range, and with it the work of a claim.
const maxUIDCount = 1 << 16

// UIDRange is host.sandbox.uid_range: the uids (and gids, the same
// numbers) a root host gives its plugins, First to First+Count-1.
type UIDRange struct {
	First int `yaml:"first"`
	Count int `yaml:"count"`
}

// WithDefaults fills zero fields.
func (r UIDRange) WithDefaults() UIDRange {
	if r.First == 0 {
		r.First = DefaultUIDFirst
	}
	if r.Count == 0 {
		r.Count = DefaultUIDCount
	}
	return r
}

// Contains reports whether uid lies in the range.
func (r UIDRange) Contains(uid int) bool { return uid >= r.First && uid < r.First+r.Count }

func (r UIDRange) check(field string) []error {
	var errs []error
	if r.First < 0 {
		errs = append(errs, fmt.Errorf("%s.first: must be a uid above 0", field))
	}
	if r.Count < 0 || r.Count > maxUIDCount {
		errs = append(errs, fmt.Errorf("%s.count: must be between 1 and %d", field, maxUIDCount))
	}
	if len(errs) > 0 {
		return errs
	}
	d := r.WithDefaults()
	last := d.First + d.Count - 1
	switch {
	case d.First < 1000:
		errs = append(errs, fmt.Errorf("%s.first: below 1000 lie the system's own users", field))
	case last > 1<<31-2:
		errs = append(errs, fmt.Errorf("%s: ends past the largest uid (%d)", field, 1<<31-2))
	case d.Contains(65534) || d.Contains(65535):
		// nobody (the overflow uid every unmapped id shows as) and the
		// 16-bit -1 are nobody's own.
		errs = append(errs, fmt.Errorf("%s: must not hold 65534 (nobody) or 65535", field))
	}
	return errs
}

// PluginUID returns the uid plugin name runs as at level (its gid is the
// same number): its own, claimed in c.UIDRange for as long as this
// process lives, when the host runs as root; ok is false where the
// plugin runs as the host's uid (an unprivileged host, or level off).
func (c Config) PluginUID(name string, level Level) (uid int, ok bool, err error) {
	if level == LevelOff || os.Geteuid() != 0 {
		return 0, false, nil
	}
	dir := c.ClaimsDir
	if dir == "" {
		dir = DefaultClaimsDir
	}
	owner := c.Owner
	if owner == "" {
		if owner, err = os.Executable(); err != nil {
			return 0, false, fmt.Errorf("%w: naming this host for its uid claims: %w", ErrSetup, err)
		}
	}
	uid, err = claimUID(filepath.Clean(dir), owner, name, c.UIDRange.WithDefaults())
	if err != nil {
		return 0, false, err
	}
	return uid, true, nil
}

// CheckUIDRange reports the uids of r that belong to a user of
// /etc/passwd or are the gid of a group of /etc/group: a plugin never
// gets one, but a range that holds some is misconfigured. field names the
// setting in the message.
func CheckUIDRange(field string, r UIDRange) error {
	r = r.WithDefaults()
	ids, err := systemIDs()
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	n, first := 0, ""
	for u := r.First; u < r.First+r.Count; u++ {
		if name, ok := ids[u]; ok {
			if first == "" {
				first = fmt.Sprintf("%d (%s)", u, name)
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d of its ids belong to users or groups of the system (the first: %s); choose a range no one uses", field, n, first)
}

// The system's user and group databases.
var passwdFile, groupFile = "/etc/passwd", "/etc/group"

// systemIDs are the uids of /etc/passwd and the gids of /etc/group, with
// a name each ("user NAME", "group NAME"). A missing file lists none.
func systemIDs() (map[int]string, error) {
	out := map[int]string{}
	for _, db := range []struct{ path, what string }{{passwdFile, "user"}, {groupFile, "group"}} {
		b, err := os.ReadFile(db.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// name:password:id:… ; comments and NIS lines ("+…") hold none.
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.SplitN(line, ":", 4)
			if len(f) < 3 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if id, err := strconv.Atoi(f[2]); err == nil {
				if _, ok := out[id]; !ok {
					out[id] = db.what + " " + f[0]
				}
			}
		}
	}
	return out, nil
}
