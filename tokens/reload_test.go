package tokens

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A reload that fails (the key file became unreadable: another user's
// mode, say) is recorded and counted, the ring signs on with the keys it
// holds, and the next good reload clears it.
func TestRingReloadFailureIsRecorded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.pem")
	r, err := NewRing(ctx, &FileSource{Path: path}, RingOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	held := r.Active()
	if err := os.Chmod(path, 0o644); err != nil { // refused by the loader
		t.Fatal(err)
	}
	r.reloadOnce(ctx)
	if r.Reload().Err() == nil || r.Reload().Failures() != 1 {
		t.Fatalf("failed reload: err %v, failures %v", r.Reload().Err(), r.Reload().Failures())
	}
	if r.Active() == nil || r.Active().ID != held.ID {
		t.Fatal("the ring dropped its keys after a failed reload")
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r.reloadOnce(ctx)
	if r.Reload().Err() != nil || r.Reload().Failures() != 1 {
		t.Fatalf("after a good reload: err %v, failures %v", r.Reload().Err(), r.Reload().Failures())
	}
}
