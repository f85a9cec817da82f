package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/fsutil"
)

// quarantine is why a plugin serves no call until an operator releases
// it: a violation whose policy reaction was "quarantine".
type quarantine struct {
	Invocation string    `json:"invocation"`
	Kinds      []string  `json:"kinds"`
	At         time.Time `json:"at"`
}

// quarantineFile is where a plugin's quarantine is kept, so that it
// survives a restart of the host; "" when the host keeps none on disk.
func (h *Host) quarantineFile(name string) string {
	if h.opts.QuarantineDir == "" {
		return ""
	}
	return filepath.Join(h.opts.QuarantineDir, name+".json")
}

// loadQuarantine reads a plugin's kept quarantine, if any.
func (h *Host) loadQuarantine(name string) *quarantine {
	path := h.quarantineFile(name)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Made now, at the plugin's registration, while there is
			// likely room: on a full disk a new directory needs a data
			// block (an empty quarantine mark in it does not).
			_ = os.MkdirAll(filepath.Dir(path), 0o700)
		} else {
			// Unreadable is kept quarantined: only an operator lifts it.
			h.opts.Log.Error("quarantine record unreadable; the plugin stays quarantined", "plugin", name, "err", err)
			return &quarantine{At: time.Now()}
		}
		return nil
	}
	q := &quarantine{}
	switch {
	case len(b) == 0:
		// The mark Quarantine leaves when the record did not fit.
		h.opts.Log.Warn("quarantine record holds no details (the disk was full when it was kept); the plugin stays quarantined",
			"plugin", name)
		if st, err := os.Stat(path); err == nil {
			q.At = st.ModTime().UTC()
		}
	case json.Unmarshal(b, q) != nil:
		h.opts.Log.Error("quarantine record malformed; the plugin stays quarantined", "plugin", name)
	}
	return q
}

// keepQuarantine writes a plugin's quarantine record. When the record
// cannot be written (a full disk), an empty file at its place still
// keeps the quarantine across a restart: it takes no data block, and
// loadQuarantine reads it as a quarantine without details.
func keepQuarantine(path string, q *quarantine) (detailsLost bool, err error) {
	b, _ := json.Marshal(q)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	err = fsutil.WriteFile(path, b, 0o600)
	if err == nil {
		return false, nil
	}
	f, merr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if merr == nil {
		merr = f.Sync()
		if cerr := f.Close(); merr == nil {
			merr = cerr
		}
	}
	if merr == nil {
		merr = fsutil.SyncDir(filepath.Dir(path))
	}
	if merr != nil {
		return false, errors.Join(err, merr)
	}
	return true, nil
}

// Quarantine stops a plugin from serving calls after a violation
// (invocation, kinds): calls are refused with ErrPluginQuarantined, its
// handles and passes are revoked, and the quarantine is kept on disk
// until Release. Evidence records plugin.quarantined.
func (h *Host) Quarantine(ctx context.Context, name, invocation string, kinds []string) error {
	h.mu.Lock()
	e := h.plugins[name]
	h.mu.Unlock()
	if e == nil {
		return ErrPluginUnknown
	}
	q := &quarantine{Invocation: invocation, Kinds: kinds, At: time.Now().UTC()}
	// In force here first: a record that cannot be kept on disk must not
	// leave the plugin serving (it is then lifted by a restart too).
	e.mu.Lock()
	e.quarantine = q
	e.mu.Unlock()
	h.feed.notify()
	var keepErr error
	if path := h.quarantineFile(name); path != "" {
		detailsLost, err := keepQuarantine(path, q)
		switch {
		case err != nil:
			keepErr = fmt.Errorf("quarantine: not kept across a restart: %w", err)
		case detailsLost:
			h.opts.Log.Warn("quarantine kept across a restart without its details: its record did not fit on the disk",
				"plugin", name)
		}
	}
	if h.opts.Broker != nil {
		if _, err := h.opts.Broker.RevokePlugin(context.WithoutCancel(ctx), name); err != nil {
			h.opts.Log.Error("quarantine: revoking the plugin's handles failed", "plugin", name, "err", err)
		}
	}
	_, err := h.opts.Record(name, "plugin.quarantined", invocation, map[string]any{"kinds": kinds})
	h.opts.Log.Warn("plugin quarantined after a violation; it serves no call until released", "plugin", name,
		"invocation", invocation, "kinds", kinds)
	return errors.Join(keepErr, err)
}

// quarantined says whether name is quarantined now. The decision point
// asks again after its own waits (an approval can take minutes), so a
// call admitted before a quarantine does not run after it.
func (h *Host) quarantined(name string) bool {
	h.mu.Lock()
	e := h.plugins[name]
	h.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.quarantine != nil
}

// Release lifts a plugin's quarantine (an operator's act, by names who):
// the plugin serves calls again. Evidence records plugin.released. A
// plugin that is not quarantined is left alone, and false returned.
func (h *Host) Release(name, by string) (bool, error) {
	h.mu.Lock()
	e := h.plugins[name]
	h.mu.Unlock()
	if e == nil {
		return false, ErrPluginUnknown
	}
	e.mu.Lock()
	was := e.quarantine != nil
	e.mu.Unlock()
	if !was {
		return false, nil
	}
	if path := h.quarantineFile(name); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("release: %w", err)
		}
	}
	e.mu.Lock()
	e.quarantine = nil
	e.mu.Unlock()
	h.feed.notify()
	_, err := h.opts.Record(name, "plugin.released", "", map[string]any{"by": by})
	return true, err
}
