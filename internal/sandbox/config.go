//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Level is how strongly a plugin is confined.
type Level string

// Levels, strongest first.
const (
	LevelAuto       Level = "auto"
	LevelNamespaces Level = "namespaces"
	LevelLandlock   Level = "landlock"
	LevelOff        Level = "off"
)

// Default limits: enough for an interpreter and a few worker processes.
const (
	DefaultMemoryMB  = 1024
	DefaultProcesses = 128
	DefaultOpenFiles = 1024
	DefaultNice      = 10
	// DefaultDiskMB bounds what a plugin writes, all its writable places
	// together: as much as its memory by default.
	DefaultDiskMB = 1024
)

// Limits bound one plugin (all its processes together for Memory and
// Processes). Zero fields take the defaults.
type Limits struct {
	// MemoryMB is the plugin's memory in MiB: the resident memory of all
	// its processes together (watched; the plugin is killed whole when it
	// reaches it) and each process's data size (RLIMIT_DATA).
	MemoryMB int `yaml:"memory_mb"`
	// Processes is the number of processes and threads the plugin may
	// have at once (watched, and RLIMIT_NPROC).
	Processes int `yaml:"processes"`
	// OpenFiles is each process's open file limit (RLIMIT_NOFILE).
	OpenFiles int `yaml:"open_files"`
	// Nice is the CPU priority of the plugin's processes (0–19; default
	// 10), so that plugins yield the CPU to the host and the proxy.
	Nice *int `yaml:"nice"`
	// DiskMB is the plugin's writable space in MiB: its private
	// directory, /tmp and /dev/shm together (watched; the plugin is
	// killed whole when it reaches it), and each file's size
	// (RLIMIT_FSIZE).
	DiskMB int `yaml:"disk_mb"`
}

// WithDefaults fills zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MemoryMB == 0 {
		l.MemoryMB = DefaultMemoryMB
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.Nice == nil {
		n := DefaultNice
		l.Nice = &n
	}
	if l.DiskMB == 0 {
		l.DiskMB = DefaultDiskMB
	}
	return l
}

// over returns l with o's set fields on top.
func (l Limits) over(o Limits) Limits {
	if o.MemoryMB != 0 {
		l.MemoryMB = o.MemoryMB
	}
	if o.Processes != 0 {
		l.Processes = o.Processes
	}
	if o.OpenFiles != 0 {
		l.OpenFiles = o.OpenFiles
	}
	if o.Nice != nil {
		l.Nice = o.Nice
	}
	if o.DiskMB != 0 {
		l.DiskMB = o.DiskMB
	}
	return l
}

// Config is the `host.sandbox:` section.
type Config struct {
	// Level is auto (default), namespaces, landlock or off.
	Level Level `yaml:"level"`
	// ReadOnly are extra paths every plugin may read (a shared Python
	// virtualenv, a Node installation outside /usr).
	ReadOnly []string `yaml:"read_only"`
	// Limits apply to every plugin.
	Limits Limits `yaml:"limits"`
	// Plugins are per-plugin grants and limits, by plugin name.
	Plugins map[string]PluginConfig `yaml:"plugins"`
	// UIDRange is where a root host takes each plugin's own uid and gid
	// (identity_linux.go); zero fields take the defaults.
	UIDRange UIDRange `yaml:"uid_range"`
	// Owner names the host that claims uids, the same across its
	// restarts and different from any other host's on the machine
	// (internal/config sets the state directory); "" is this program's
	// path.
	Owner string `yaml:"-"`
	// ClaimsDir is the machine-wide directory of uid claims (""
	// DefaultClaimsDir); every host of a machine must use the same one.
	ClaimsDir string `yaml:"-"`
}

// PluginConfig is one plugin's extra read-only paths and limits.
type PluginConfig struct {
	ReadOnly []string `yaml:"read_only"`
	Limits   Limits   `yaml:"limits"`
}

// For returns the level, read-only grants and limits of plugin name.
func (c Config) For(name string) (Level, []string, Limits) {
	lv := c.Level
	if lv == "" {
		lv = LevelAuto
	}
	p := c.Plugins[name]
	ro := slices.Concat(c.ReadOnly, p.ReadOnly)
	return lv, ro, c.Limits.WithDefaults().over(p.Limits)
}

// Validate returns every problem at once, in a stable order.
func (c Config) Validate() error {
	var errs []error
	switch c.Level {
	case "", LevelAuto, LevelNamespaces, LevelLandlock, LevelOff:
	default:
		errs = append(errs, errors.New("host.sandbox.level: must be auto, namespaces, landlock or off"))
	}
	errs = append(errs, checkPaths("host.sandbox.read_only", c.ReadOnly)...)
	errs = append(errs, c.Limits.check("host.sandbox.limits")...)
	errs = append(errs, c.UIDRange.check("host.sandbox.uid_range")...)
	names := make([]string, 0, len(c.Plugins))
	for n := range c.Plugins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := c.Plugins[n]
		errs = append(errs, checkPaths(fmt.Sprintf("host.sandbox.plugins.%s.read_only", n), p.ReadOnly)...)
		errs = append(errs, p.Limits.check(fmt.Sprintf("host.sandbox.plugins.%s.limits", n))...)
	}
	return errors.Join(errs...)
}

func checkPaths(field string, paths []string) []error {
	var errs []error
	for i, p := range paths {
		switch {
		case !filepath.IsAbs(p):
			errs = append(errs, fmt.Errorf("%s[%d]: must be an absolute path", field, i))
		case filepath.Clean(p) == "/":
			errs = append(errs, fmt.Errorf("%s[%d]: granting / would show the plugin everything", field, i))
		case strings.ContainsAny(p, "\x00\n"):
			errs = append(errs, fmt.Errorf("%s[%d]: contains a NUL or newline", field, i))
		}
	}
	return errs
}

func (l Limits) check(field string) []error {
	var errs []error
	if l.MemoryMB < 0 || l.MemoryMB > 1<<20 {
		errs = append(errs, fmt.Errorf("%s.memory_mb: must be between 1 and %d", field, 1<<20))
	} else if l.MemoryMB != 0 && l.MemoryMB < 16 {
		errs = append(errs, fmt.Errorf("%s.memory_mb: below 16 MiB no interpreter starts", field))
	}
	if l.Processes < 0 || l.Processes > 1<<16 {
		errs = append(errs, fmt.Errorf("%s.processes: must be between 1 and %d", field, 1<<16))
	}
	if l.OpenFiles < 0 || l.OpenFiles > 1<<20 {
		errs = append(errs, fmt.Errorf("%s.open_files: must be between 1 and %d", field, 1<<20))
	} else if l.OpenFiles != 0 && l.OpenFiles < 16 {
		errs = append(errs, fmt.Errorf("%s.open_files: below 16 no runtime starts", field))
	}
	if l.Nice != nil && (*l.Nice < 0 || *l.Nice > 19) {
		errs = append(errs, fmt.Errorf("%s.nice: must be between 0 and 19", field))
	}
	if l.DiskMB < 0 || l.DiskMB > 1<<20 {
		errs = append(errs, fmt.Errorf("%s.disk_mb: must be between 1 and %d", field, 1<<20))
	}
	return errs
}
