// Package systemd_test runs the shipped systemd units' commands as
// systemd would (see units_test.go).
package systemd_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// unit is what the test needs of a .service file.
type unit struct {
	name                   string
	user, group            string
	supplementary          []string
	execStartPre           [][]string
	execStart              []string
	umask                  os.FileMode
	stateDirs, runtimeDirs []string
	stateMode, runtimeMode os.FileMode
	runtimePreserve        bool
}

// parseUnit reads the directives of a unit file (no quoting, no
// specifiers: the shipped units use neither).
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{name: strings.TrimSuffix(filepath.Base(path), ".service"), umask: 0o022, stateMode: 0o755, runtimeMode: 0o755}
	mode := func(v string) os.FileMode {
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			t.Fatalf("%s: mode %q", path, v)
		}
		return os.FileMode(n)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "User":
			u.user = v
		case "Group":
			u.group = v
		case "SupplementaryGroups":
			u.supplementary = strings.Fields(v)
		case "ExecStartPre":
			u.execStartPre = append(u.execStartPre, strings.Fields(v))
		case "ExecStart":
			u.execStart = strings.Fields(v)
		case "UMask":
			u.umask = mode(v)
		case "StateDirectory":
			u.stateDirs = strings.Fields(v)
		case "StateDirectoryMode":
			u.stateMode = mode(v)
		case "RuntimeDirectory":
			u.runtimeDirs = strings.Fields(v)
		case "RuntimeDirectoryMode":
			u.runtimeMode = mode(v)
		case "RuntimeDirectoryPreserve":
			u.runtimePreserve = v == "yes" || v == "restart"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if u.user == "" || len(u.execStart) == 0 {
		t.Fatalf("%s: no User= or ExecStart=", path)
	}
	return u
}

// sysusers is the users and groups a sysusers.d file creates: group
// name → members, user name → primary group.
type sysusers struct {
	groups  []string
	users   map[string]string
	members map[string][]string // user → extra groups (m lines)
	order   []string
}

func parseSysusers(t *testing.T, path string) sysusers {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sysusers{users: map[string]string{}, members: map[string][]string{}}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "g":
			s.groups = append(s.groups, f[1])
		case "u":
			_, primary, _ := strings.Cut(f[2], ":")
			s.users[f[1]] = primary
			s.order = append(s.order, f[1])
		case "m":
			s.members[f[1]] = append(s.members[f[1]], f[2])
		}
	}
	return s
}

// tmpfile is a `d` line of a tmpfiles.d file.
type tmpfile struct {
	path        string
	mode        os.FileMode
	user, group string
}

func parseTmpfiles(t *testing.T, path string) []tmpfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []tmpfile
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "d" {
			continue
		}
		n, err := strconv.ParseUint(f[2], 8, 32)
		if err != nil {
			t.Fatalf("%s: mode %q", path, f[2])
		}
		out = append(out, tmpfile{path: f[1], mode: os.FileMode(n), user: f[3], group: f[4]})
	}
	return out
}
