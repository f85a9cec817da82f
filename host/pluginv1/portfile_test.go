package pluginv1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/airlock-dev/airlock/examples/notes/notesv1"
	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

const notesPort = "numinance.ports.notes.v1"

func compiledPorts() *host.PortSet {
	return host.NewPortSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto)
}

// notesSet is the notes port's descriptor set as protoc builds it with
// --include_imports (descriptor.proto, options.proto, notes.proto),
// changed by edit.
func notesSet(t testing.TB, edit func(set *descriptorpb.FileDescriptorSet)) []byte {
	t.Helper()
	set := plugin.DescriptorSet(notesv1.File_numinance_ports_notes_v1_notes_proto)
	if edit != nil {
		edit(set)
	}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fileOf(set *descriptorpb.FileDescriptorSet, pkg string) *descriptorpb.FileDescriptorProto {
	for _, f := range set.GetFile() {
		if f.GetPackage() == pkg {
			return f
		}
	}
	return nil
}

func ruleOf(f *descriptorpb.FileDescriptorProto, method string) *pb.MethodRule {
	for _, m := range f.GetService()[0].GetMethod() {
		if m.GetName() == method {
			return proto.GetExtension(m.GetOptions(), pb.E_Rule).(*pb.MethodRule)
		}
	}
	return nil
}

// The review lists every method with the rule the host will enforce.
func TestParsePortSetReviews(t *testing.T) {
	pf, err := ParsePortSet(notesSet(t, nil), compiledPorts().Compiled)
	if err != nil {
		t.Fatal(err)
	}
	if pf.Name != notesPort || len(pf.SHA256) != 64 || len(pf.Methods) != 2 {
		t.Fatalf("review: %+v", pf)
	}
	create := pf.Methods[1]
	if create.Method != "numinance.ports.notes.v1.Notes/CreateNote" || create.RiskClass != "RISK_CLASS_WRITE" ||
		create.ExecutionMode != "EXECUTION_MODE_CALL" || create.DryRunSupported || create.SideEffect != "SIDE_EFFECT_WRITE" ||
		len(create.DeclaredEvidence) != 1 || create.DeclaredEvidence[0] != "notes.created" {
		t.Fatalf("CreateNote review: %+v", create)
	}
	if pf.Methods[0].RiskClass != "RISK_CLASS_READ" || !pf.Methods[0].DryRunSupported {
		t.Fatalf("ListNotes review: %+v", pf.Methods[0])
	}
}

// A buf image is a FileDescriptorSet whose files carry buf's own field
// (8042): it is accepted, and the review is the same.
func TestParsePortSetAcceptsBufImage(t *testing.T) {
	set := plugin.DescriptorSet(notesv1.File_numinance_ports_notes_v1_notes_proto)
	for _, f := range set.GetFile() {
		ext := protowire.AppendTag(nil, 8042, protowire.BytesType)
		ext = protowire.AppendBytes(ext, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1))
		f.ProtoReflect().SetUnknown(ext)
	}
	b, _ := proto.Marshal(set)
	pf, err := ParsePortSet(b, compiledPorts().Compiled)
	if err != nil {
		t.Fatal(err)
	}
	if pf.Name != notesPort || len(pf.Methods) != 2 || pf.Methods[1].RiskClass != "RISK_CLASS_WRITE" {
		t.Fatalf("buf image review: %+v", pf)
	}
}

// Each refusal says specifically why.
func TestParsePortSetRefusals(t *testing.T) {
	tickets := func(edit func(*descriptorpb.FileDescriptorSet)) []byte {
		set := plugin.DescriptorSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto)
		if edit != nil {
			edit(set)
		}
		b, _ := proto.Marshal(set)
		return b
	}
	drop := func(pkg string) func(*descriptorpb.FileDescriptorSet) {
		return func(set *descriptorpb.FileDescriptorSet) {
			var keep []*descriptorpb.FileDescriptorProto
			for _, f := range set.File {
				if f.GetPackage() != pkg {
					keep = append(keep, f)
				}
			}
			set.File = keep
		}
	}
	for _, tc := range []struct {
		name    string
		set     []byte
		wantErr error
		want    string
	}{
		{"not a set", []byte("\xff\xff\xff"), ErrPortSet, "not a FileDescriptorSet"},
		{"no port package", notesSet(t, drop(notesPort)), ErrNoPortPackage, ""},
		{"a port package that is not numinance.ports.<name>.v<major>", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			fileOf(set, notesPort).Package = proto.String("numinance.ports.Notes")
		}), ErrNoPortPackage, "numinance.ports.<name>.v<major>"},
		{"a method without a rule", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			fileOf(set, notesPort).Service[0].Method[1].Options = nil
		}), ErrMethodRule, "CreateNote declares no numinance.plugin.v1.rule"},
		{"a rule without a risk class", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "CreateNote").RiskClass = pb.RiskClass_RISK_CLASS_UNSPECIFIED
		}), ErrMethodRule, "CreateNote: risk_class"},
		{"an undefined risk class", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "ListNotes").RiskClass = 77
		}), ErrMethodRule, "ListNotes: risk_class"},
		{"a rule without an execution mode", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "ListNotes").ExecutionMode = pb.ExecutionMode_EXECUTION_MODE_UNSPECIFIED
		}), ErrMethodRule, "execution_mode"},
		{"a rule without a side effect", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "ListNotes").DeclaredSideEffect = pb.SideEffect_SIDE_EFFECT_UNSPECIFIED
		}), ErrMethodRule, "declared_side_effect"},
		{"host-authored declared evidence", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "CreateNote").DeclaredEvidence = []string{"approval.granted"}
		}), ErrMethodRule, "host-authored"},
		{"server streaming on a unary method", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, notesPort), "ListNotes").ServerStreaming = true
		}), ErrMethodRule, "server_streaming"},
		{"redefined numinance.plugin.v1 options", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			f := fileOf(set, "numinance.plugin.v1")
			f.EnumType[0].Value = append(f.EnumType[0].Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String("RISK_CLASS_NONE"), Number: proto.Int32(5)})
		}), ErrRedefinesHostFile, "numinance/plugin/v1/options.proto differs from the host's copy"},
		{"numinance.plugin.v1 under another path", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			set.File = append(set.File, &descriptorpb.FileDescriptorProto{Name: proto.String("evil/options.proto"), Package: proto.String("numinance.plugin.v1")})
		}), ErrRedefinesHostFile, "evil/options.proto"},
		{"the rule option redeclared", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			set.File = append(set.File, &descriptorpb.FileDescriptorProto{Name: proto.String("acme/opts.proto"), Package: proto.String("acme"),
				Dependency: []string{"google/protobuf/descriptor.proto"},
				Extension: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("rule"), Number: proto.Int32(51001), Extendee: proto.String(".google.protobuf.MethodOptions"),
					Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}}})
		}), ErrRedefinesHostFile, "acme/opts.proto declares an extension of google.protobuf.MethodOptions"},
		{"the compiled tickets port changed", tickets(func(set *descriptorpb.FileDescriptorSet) {
			ruleOf(fileOf(set, "numinance.ports.tickets.v1"), "CreateTicket").RiskClass = pb.RiskClass_RISK_CLASS_READ
		}), ErrRedefinesHostFile, "tickets.proto differs from the host's copy"},
		{"the compiled tickets port unchanged", tickets(nil), host.ErrPortCompiled, ""},
		{"an import missing", notesSet(t, drop("numinance.plugin.v1")), ErrImportMissing,
			"numinance/ports/notes/v1/notes.proto imports numinance/plugin/v1/options.proto"},
		{"two ports", notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
			f := proto.Clone(fileOf(set, notesPort)).(*descriptorpb.FileDescriptorProto)
			f.Name, f.Package = proto.String("memo.proto"), proto.String("numinance.ports.memo.v1")
			set.File = append(set.File, f)
		}), ErrPortSet, "more than one port file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePortSet(tc.set, compiledPorts().Compiled)
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrPortSet) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.want)
			}
		})
	}
}

// Install keeps the set and pins its digest; the same set again changes
// nothing; another digest is refused without replace, and served with
// it; remove stops serving it. A compiled port is neither replaced nor
// removed.
func TestInstallPort(t *testing.T) {
	state := t.TempDir()
	lock, dir := filepath.Join(state, "plugins.lock.json"), PortsDir(state)
	ports := compiledPorts()
	first := notesSet(t, nil)
	res, err := InstallPort(first, false, dir, lock, ports)
	if err != nil || res.Replaced || res.Same {
		t.Fatalf("install: %+v %v", res, err)
	}
	lf, _ := ReadLockfile(lock)
	e := lf.Ports[notesPort]
	if e.SHA256 != res.Port.SHA256 || e.File != filepath.Join(dir, notesPort, e.SHA256+".binpb") {
		t.Fatalf("lockfile entry: %+v", e)
	}
	if b, _ := os.ReadFile(e.File); string(b) != string(first) {
		t.Fatal("the stored set is not the one installed")
	}
	if _, ok := ports.Lookup(notesPort); !ok {
		t.Fatal("the installed port is not served")
	}
	if res, err := InstallPort(first, false, dir, lock, ports); err != nil || !res.Same {
		t.Fatalf("the same set again: %+v %v", res, err)
	}
	second := notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
		ruleOf(fileOf(set, notesPort), "CreateNote").DeclaredEvidence = []string{"notes.created", "notes.indexed"}
	})
	if _, err := InstallPort(second, false, dir, lock, ports); !errors.Is(err, ErrPortInstalled) {
		t.Fatalf("another digest without replace: %v", err)
	}
	res, err = InstallPort(second, true, dir, lock, ports)
	if err != nil || !res.Replaced {
		t.Fatalf("replace: %+v %v", res, err)
	}
	fd, _ := ports.Lookup(notesPort)
	if methods, _ := reviewPort(fd); len(methods[1].DeclaredEvidence) != 2 {
		t.Fatalf("the replacement is not what is served: %+v", methods)
	}
	if des, _ := os.ReadDir(filepath.Join(dir, notesPort)); len(des) != 1 {
		t.Fatalf("the replaced set is still stored: %d files", len(des))
	}
	if err := RemovePort("numinance.ports.tickets.v1", dir, lock, ports); !errors.Is(err, host.ErrPortCompiled) {
		t.Fatalf("remove the compiled port: %v", err)
	}
	if err := RemovePort(notesPort, dir, lock, ports); err != nil {
		t.Fatal(err)
	}
	if _, ok := ports.Lookup(notesPort); ok {
		t.Fatal("a removed port is still served")
	}
	if err := RemovePort(notesPort, dir, lock, ports); !errors.Is(err, ErrPortNotInstalled) {
		t.Fatalf("remove twice: %v", err)
	}
}

// A stored set with one bit flipped is refused at the next load, with a
// specific error, and the other installed ports are served.
func TestLoadPortsRefusesTamperedSet(t *testing.T) {
	state := t.TempDir()
	lock, dir := filepath.Join(state, "plugins.lock.json"), PortsDir(state)
	memo := notesSet(t, func(set *descriptorpb.FileDescriptorSet) {
		f := fileOf(set, notesPort)
		f.Name, f.Package = proto.String("memo.proto"), proto.String("numinance.ports.memo.v1")
		for _, s := range f.Service {
			for _, m := range s.Method {
				m.InputType = proto.String(strings.Replace(m.GetInputType(), "notes.v1", "memo.v1", 1))
				m.OutputType = proto.String(strings.Replace(m.GetOutputType(), "notes.v1", "memo.v1", 1))
			}
		}
		for _, m := range f.MessageType {
			for _, fl := range m.Field {
				if fl.TypeName != nil {
					fl.TypeName = proto.String(strings.Replace(fl.GetTypeName(), "notes.v1", "memo.v1", 1))
				}
			}
		}
	})
	for _, set := range [][]byte{notesSet(t, nil), memo} {
		if _, err := InstallPort(set, false, dir, lock, compiledPorts()); err != nil {
			t.Fatal(err)
		}
	}
	lf, _ := ReadLockfile(lock)
	stored := lf.Ports[notesPort].File
	b, _ := os.ReadFile(stored)
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(stored, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ports := compiledPorts()
	refused, err := LoadPorts(ports, lock)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || !errors.Is(refused[0], ErrPortDigestMismatch) || !strings.Contains(refused[0].Error(), notesPort) {
		t.Fatalf("refused: %v", refused)
	}
	if _, ok := ports.Lookup(notesPort); ok {
		t.Fatal("the tampered port is served")
	}
	if _, ok := ports.Lookup("numinance.ports.memo.v1"); !ok {
		t.Fatal("the intact port is not served")
	}
	if why := ports.Refused()[notesPort]; !strings.Contains(why, "digest the lockfile pins") {
		t.Fatalf("refused reason: %q", why)
	}
}
