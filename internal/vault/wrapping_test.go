package vault

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Looking the wrapped secret id up (what check-config --vault does) leaves
// it usable: after any number of lookups airlock serve still unwraps it
// and logs in; once used, the lookup says it is not usable.
func TestLookupWrappedSecretIDLeavesItUsable(t *testing.T) {
	ctx := context.Background()
	v := testenv.NewVault(t)
	dir := bootstrap(t, v, "OWNER=")
	cfg := appRoleConfig(v, dir)
	for range 3 {
		info, err := LookupWrappedSecretID(ctx, cfg)
		if err != nil {
			t.Fatalf("lookup: %v", err)
		}
		if left := time.Until(info.Expires); left <= 0 || left > 11*time.Minute {
			t.Fatalf("expires in %v, want within the 10m wrap ttl", left)
		}
	}
	if _, err := Connect(ctx, cfg, nil); err != nil {
		t.Fatalf("login after the lookups: %v", err)
	}
	if _, err := LookupWrappedSecretID(ctx, cfg); err == nil {
		t.Fatal("a used wrapping token looked usable")
	}
}

// bootstrap.sh hands role-id and secret-id to the user airlock serve runs
// as (OWNER), so serve can read them; run as root it can.
func TestBootstrapWritesForTheServiceUser(t *testing.T) {
	testenv.NeedsRoot(t, "giving a file to another user is root's")
	v := testenv.NewVault(t)
	const uid, gid = 64995, 64994
	dir := bootstrap(t, v, "OWNER=64995:64994")
	for _, f := range []string{"role-id", "secret-id"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, f), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != uid || st.Gid != gid || st.Mode&0o777 != 0o600 {
			t.Errorf("%s: owner %d:%d mode %#o, want %d:%d 0600", f, st.Uid, st.Gid, st.Mode&0o777, uid, gid)
		}
	}
}
