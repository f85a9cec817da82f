package host

import (
	"errors"
	"io"
	"os"
	"strings"
)

// Artifacts opens the content a plugin/v1 Reference points at (what
// ResolveReference serves). The host verifies
// the sha256 itself; a store only finds bytes.
type Artifacts interface {
	Open(uri string) (io.ReadCloser, error)
}

// DirArtifacts serves "artifact://NAME" from files in a directory.
type DirArtifacts struct{ Dir string }

// ErrArtifactNotFound: no artifact at the reference's URI.
var ErrArtifactNotFound = errors.New("artifact not found")

// Open implements Artifacts.
func (d DirArtifacts) Open(uri string) (io.ReadCloser, error) {
	name, ok := strings.CutPrefix(uri, "artifact://")
	if !ok || name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, ErrArtifactNotFound
	}
	// OpenInRoot: a symbolic link in the directory cannot reach outside it.
	f, err := os.OpenInRoot(d.Dir, name)
	if err != nil {
		return nil, ErrArtifactNotFound
	}
	return f, nil
}
