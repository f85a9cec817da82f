package config

import (
	"strings"
	"testing"
	"time"
)

// The Executa lifecycle timeouts are settable from the config file (for
// hosts where plugins start slowly), and a bad one is named.
func TestExecutaTimeoutsFromConfig(t *testing.T) {
	c, err := Parse([]byte("version: v1\nhost:\n  executa:\n    timeouts: {initialize: 30s, describe: 45s, health: 10s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if to := c.Host.Executa.Timeouts; to.Initialize != 30*time.Second || to.Describe != 45*time.Second || to.Health != 10*time.Second || to.Invoke != 0 {
		t.Fatalf("timeouts: %+v", to)
	}
	c, err = Parse([]byte("version: v1\nhost:\n  executa:\n    timeouts: {health: -1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "host.executa.timeouts.health") {
		t.Fatalf("negative timeout: %v", err)
	}
	if _, err := Parse([]byte("version: v1\nhost:\n  executa:\n    timeouts: {initialise: 1s}\n")); err == nil {
		t.Fatal("a misspelt timeout was accepted")
	}
}
