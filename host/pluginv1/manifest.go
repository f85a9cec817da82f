package pluginv1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/broker"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// MaxManifestSize bounds GetManifest and manifest.yaml.
const MaxManifestSize = plugin.MaxManifestSize

var portName = regexp.MustCompile(`^numinance\.ports\.[a-z][a-z0-9_]*\.v[1-9][0-9]*$`)

// LoadManifest reads manifest.yaml strictly (unknown keys are errors) and
// checks it: the provider-side loader plus the host's validation.
func LoadManifest(path string) (*pb.Manifest, error) {
	m, err := plugin.LoadManifest(path)
	if err != nil {
		return nil, err
	}
	if err := CheckManifest(m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// ParseManifest decodes manifest YAML into the protocol's Manifest and
// checks it.
func ParseManifest(b []byte) (*pb.Manifest, error) {
	m, err := plugin.DecodeManifest(b)
	if err != nil {
		return nil, err
	}
	return m, CheckManifest(m)
}

// CheckManifest returns every problem at once.
func CheckManifest(m *pb.Manifest) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if m.GetName() == "" || m.GetVersion() == "" {
		add("name and version are required")
	}
	for i, p := range m.GetPorts() {
		if !portName.MatchString(p) {
			add("ports[%d]: must be numinance.ports.<name>.v<major>", i)
		}
	}
	seen := map[string]bool{}
	for i, ci := range m.GetCredentialIntents() {
		if ci.GetName() == "" || seen[ci.GetName()] {
			add("credential_intents[%d]: name is missing or repeated", i)
		}
		seen[ci.GetName()] = true
		if ci.GetClass() != string(broker.ClassRead) && ci.GetClass() != string(broker.ClassWrite) {
			add("credential_intents[%d].class: must be read or write", i)
		}
		if len(ci.GetDestinations()) == 0 {
			add("credential_intents[%d]: declares no destination", i)
		}
		for j, d := range ci.GetDestinations() {
			if _, err := destinationOf(d).Normalize(); err != nil {
				add("credential_intents[%d].destinations[%d]: %v", i, j, err)
			}
		}
	}
	for i, typ := range m.GetEvidenceRecordTypes() {
		if hostAuthoredType(typ) {
			add("evidence_record_types[%d]: a host-authored type (%s…): only the host writes those records", i, strings.Join(hostAuthored, "…, "))
		}
	}
	return errors.Join(errs...)
}

func destinationOf(d *pb.Destination) broker.Destination {
	return broker.Destination{Host: d.GetHost(), Port: int(d.GetPort()), PathPrefix: d.GetPathPrefix(), Methods: d.GetMethods()}
}

// ManifestDigest is the SHA-256 of the manifest's deterministic encoding:
// what a lockfile pins.
func ManifestDigest(m *pb.Manifest) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// sameManifest compares what a provider declares with what was installed.
func sameManifest(installed, got *pb.Manifest) bool { return proto.Equal(installed, got) }
