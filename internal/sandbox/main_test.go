//go:build linux

package sandbox

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	Init()
	if spec := os.Getenv(claimHostEnv); spec != "" {
		claimHost(spec) // TestUIDClaims's hosts
	}
	if mode := os.Getenv(setgroupsEnv); mode != "" {
		setgroupsChild(mode) // TestUnprivilegedUserNamespaceKeepsGroups
	}
	os.Exit(m.Run())
}
