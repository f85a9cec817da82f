package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
		if !errors.Is(err, fs.ErrNotExist) {
			// Unreadable is kept quarantined: only an operator lifts it.
			h.opts.Log.Error("quarantine record unreadable; the plugin stays quarantined", "plugin", name, "err", err)
			return &quarantine{At: time.Now()}
		}
		return nil
	}
	q := &quarantine{}
	if json.Unmarshal(b, q) != nil {
		h.opts.Log.Error("quarantine record malformed; the plugin stays quarantined", "plugin", name)
	}
	return q
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
		b, _ := json.Marshal(q)
		keepErr = os.MkdirAll(filepath.Dir(path), 0o700)
		if keepErr == nil {
			keepErr = fsutil.WriteFile(path, b, 0o600)
		}
		if keepErr != nil {
			keepErr = fmt.Errorf("quarantine: not kept across a restart: %w", keepErr)
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
