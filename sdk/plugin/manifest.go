package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// MaxManifestSize bounds manifest.yaml and the host's GetManifest answer.
const MaxManifestSize = 1 << 20

// LoadManifest reads a provider's manifest.yaml into the protocol's
// Manifest, so a provider can serve GetManifest from the same file the
// host installs. Unknown keys are errors. It checks the shape only; the
// host validates names, classes and destinations at install.
func LoadManifest(path string) (*pluginv1.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s: larger than %d bytes", path, MaxManifestSize)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// DecodeManifest decodes manifest YAML into the protocol's Manifest.
func DecodeManifest(b []byte) (*pluginv1.Manifest, error) {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, errors.New("not valid YAML")
	}
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, errors.New("not a mapping of plain values")
	}
	m := &pluginv1.Manifest{}
	// The shape check names a misfit field by its path; protojson's own
	// errors quote the package's value, so only their verdict is used.
	var shape any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&shape); err != nil {
		return nil, errors.New("not a mapping of plain values")
	}
	if err := shapeError(shape, m.ProtoReflect().Descriptor(), ""); err != nil {
		return nil, fmt.Errorf("does not match plugin/v1 Manifest: %w", err)
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(j, m); err != nil {
		return nil, errors.New("does not match plugin/v1 Manifest")
	}
	return m, nil
}
