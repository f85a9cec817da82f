package host

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// A state directory this user may not make (a container's uid with
// HOME=/, a read-only root file system) is named with the fix, not only
// as "mkdir /.local: permission denied".
func TestStateDirErrorNamesTheFix(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS} {
		err := StateDirError(&fs.PathError{Op: "mkdir", Path: "/.local", Err: errno})
		if !strings.HasPrefix(err.Error(), "state directory: mkdir /.local: ") || !strings.Contains(err.Error(), "set state_dir, or XDG_STATE_HOME,") {
			t.Errorf("%v: %v", errno, err)
		}
	}
	if err := StateDirError(&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.ENOSPC}); strings.Contains(err.Error(), "set state_dir") {
		t.Errorf("a full disk: %v", err)
	}
}
