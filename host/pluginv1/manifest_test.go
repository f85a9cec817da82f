package pluginv1

import (
	"strings"
	"testing"
)

// A manifest that declares a host-authored evidence record type is
// refused at install, naming the field and never the value, instead of
// being accepted and refused only at EmitEvidence.
func TestManifestRefusesHostAuthoredRecordTypes(t *testing.T) {
	base := "name: example.t\nversion: 1.0.0\nevidence_record_types: [tickets.created, %s]\n"
	for _, typ := range hostAuthored {
		t.Run(typ, func(t *testing.T) {
			_, err := ParseManifest([]byte(strings.Replace(base, "%s", typ+"forged", 1)))
			if err == nil || !strings.Contains(err.Error(), "evidence_record_types[1]: a host-authored type") {
				t.Fatalf("%sforged declared: %v", typ, err)
			}
			if strings.Contains(err.Error(), "forged") {
				t.Fatalf("the error quotes the manifest's value: %v", err)
			}
		})
	}
	if _, err := ParseManifest([]byte(strings.Replace(base, ", %s", "", 1))); err != nil {
		t.Fatalf("a plugin's own record type: %v", err)
	}
}

// The decision point's records (access grants issued and revoked,
// approvals) are the host's: a plugin cannot forge one.
func TestDecisionRecordsAreHostAuthored(t *testing.T) {
	for _, typ := range []string{"grant.issued", "grant.revoked", "approval.granted", "approval.decided", "policy.decision"} {
		if !hostAuthoredType(typ) {
			t.Errorf("%s is not host-authored", typ)
		}
	}
}

// A provider's record of type T is written as "plugin.T": the types the
// host itself writes in that namespace (a plugin's quarantine and its
// release) cannot be declared, so a provider cannot forge
// plugin.quarantined or plugin.released.
func TestQuarantineRecordsAreHostAuthored(t *testing.T) {
	base := "name: example.t\nversion: 1.0.0\nevidence_record_types: [tickets.created, %s]\n"
	for _, typ := range []string{"quarantined", "released", "quarantined.again"} {
		if _, err := ParseManifest([]byte(strings.Replace(base, "%s", typ, 1))); err == nil ||
			!strings.Contains(err.Error(), "evidence_record_types[1]: a host-authored type") {
			t.Errorf("%s declared: %v", typ, err)
		}
		if !hostAuthoredType(typ) {
			t.Errorf("%s can be emitted as plugin.%s", typ, typ)
		}
	}
	if hostAuthoredType("quarantine_report") {
		t.Error("a plugin's own type that only begins like a host record is refused")
	}
}
