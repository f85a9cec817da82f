package pluginv1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// Bounds of a descriptor set an operator installs.
const (
	MaxPortSetBytes = 8 << 20
	MaxPortSetFiles = 512
)

// Why a descriptor set is refused; each refusal wraps ErrPortSet and one
// of these, and names the file or method, never the set's bytes.
var (
	ErrPortSet            = errors.New("descriptor set refused")
	ErrNoPortPackage      = errors.New("the set holds no numinance.ports.<name>.v<major> file")
	ErrMethodRule         = errors.New("a method has no valid numinance.plugin.v1.rule")
	ErrRedefinesHostFile  = errors.New("the set redefines a file the host compiles (numinance.plugin.v1 options or a compiled port)")
	ErrImportMissing      = errors.New("an import is missing from the set (build it with protoc --include_imports)")
	ErrPortDigestMismatch = errors.New("the stored descriptor set does not have the digest the lockfile pins")
)

// PortFile is a reviewed port: the host's copy of its port file, built
// from an operator's descriptor set, with the set's digest.
type PortFile struct {
	Name   string // the port's package, numinance.ports.<name>.v<major>
	SHA256 string // of the set's bytes, as given
	File   protoreflect.FileDescriptor
	// Methods are what install reviews: every method of every service.
	Methods []MethodReview
}

// MethodReview is one method of a port as the host will treat it.
type MethodReview struct {
	Method           string   `json:"method"` // Service/Method, full
	RiskClass        string   `json:"risk_class"`
	ExecutionMode    string   `json:"execution_mode"`
	DryRunSupported  bool     `json:"dry_run_supported"`
	SideEffect       string   `json:"declared_side_effect"`
	DeclaredEvidence []string `json:"declared_evidence,omitempty"`
	ServerStreaming  bool     `json:"server_streaming,omitempty"`
}

// ParsePortSet reviews a descriptor set an operator installs: the output
// of `protoc --include_imports --descriptor_set_out`, or a buf image
// (`buf build -o FILE.binpb`; an Image is a FileDescriptorSet whose files
// carry one more field, which is dropped). It must hold exactly one port
// file (package numinance.ports.<name>.v<major>, not a compiled port),
// every method of which carries a valid numinance.plugin.v1.rule, and
// every file it imports. A file the host compiles (numinance.plugin.v1,
// a compiled port) must equal the host's copy; the host's copies are the
// ones used, as they are for the google.protobuf files. Options are read
// through the host's own registry, and source_code_info is discarded.
func ParsePortSet(b []byte, compiled func(pkg string) bool) (*PortFile, error) {
	refuse := func(why error, format string, a ...any) (*PortFile, error) {
		if format == "" {
			return nil, fmt.Errorf("%w: %w", ErrPortSet, why)
		}
		return nil, fmt.Errorf("%w: %w: %s", ErrPortSet, why, fmt.Sprintf(format, a...))
	}
	if len(b) > MaxPortSetBytes {
		return refuse(errors.New("larger than the bound"), "%d bytes at most", MaxPortSetBytes)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, set); err != nil {
		return refuse(errors.New("not a FileDescriptorSet or buf image"), "")
	}
	if len(set.GetFile()) > MaxPortSetFiles {
		return refuse(errors.New("too many files"), "%d at most", MaxPortSetFiles)
	}
	byPath := map[string]*descriptorpb.FileDescriptorProto{}
	for i, f := range set.GetFile() {
		f.SourceCodeInfo = nil
		f.ProtoReflect().SetUnknown(nil) // a buf image's per-file field
		if f.GetName() == "" || byPath[f.GetName()] != nil {
			return refuse(errors.New("a file has no name or a repeated one"), "file[%d]", i)
		}
		byPath[f.GetName()] = f
	}
	var port *descriptorpb.FileDescriptorProto
	sawCompiled := false
	for _, f := range set.GetFile() {
		for _, dep := range f.GetDependency() {
			if byPath[dep] == nil {
				return refuse(ErrImportMissing, "%s imports %s", f.GetName(), dep)
			}
		}
		pkg := f.GetPackage()
		if hostFile(f, compiled) {
			hf, err := protoregistry.GlobalFiles.FindFileByPath(f.GetName())
			if err != nil || pkg != string(hf.Package()) {
				return refuse(ErrRedefinesHostFile, "%s declares package %s", f.GetName(), pkg)
			}
			if strings.HasPrefix(pkg, "google.protobuf") {
				continue // the host's own well-known types; versions differ
			}
			sawCompiled = sawCompiled || compiled(pkg)
			want := protodesc.ToFileDescriptorProto(hf)
			want.SourceCodeInfo = nil
			if !proto.Equal(want, f) {
				return refuse(ErrRedefinesHostFile, "%s differs from the host's copy", f.GetName())
			}
			continue
		}
		switch {
		case strings.HasPrefix(pkg, "numinance.ports."):
			if !portName.MatchString(pkg) {
				return refuse(ErrNoPortPackage, "%s: package must be numinance.ports.<name>.v<major>", f.GetName())
			}
			if port != nil {
				return refuse(errors.New("more than one port file: install each port from a set of its own"), "%s and %s", port.GetName(), f.GetName())
			}
			port = f
		case pkg == "numinance" || strings.HasPrefix(pkg, "numinance."):
			return refuse(errors.New("a file uses the reserved numinance. package prefix"), "%s", f.GetName())
		}
		for _, ext := range f.GetExtension() {
			extendee := protoreflect.FullName(strings.TrimPrefix(ext.GetExtendee(), "."))
			if _, err := protoregistry.GlobalTypes.FindExtensionByNumber(extendee, protoreflect.FieldNumber(ext.GetNumber())); err == nil {
				return refuse(ErrRedefinesHostFile, "%s declares an extension of %s the host defines", f.GetName(), extendee)
			}
		}
	}
	if port == nil && sawCompiled {
		return refuse(host.ErrPortCompiled, "")
	}
	if port == nil {
		return refuse(ErrNoPortPackage, "")
	}
	fd, err := buildFile(port, byPath, compiled)
	if err != nil {
		return refuse(errors.New("the port file does not resolve"), "%s: %v", port.GetName(), err)
	}
	methods, err := reviewPort(fd)
	if err != nil {
		return refuse(ErrMethodRule, "%v", err)
	}
	sum := sha256.Sum256(b)
	return &PortFile{Name: port.GetPackage(), SHA256: hex.EncodeToString(sum[:]), File: fd, Methods: methods}, nil
}

// buildFile makes the host's copy of f: its imports resolve to the
// host's own files where the host has them, else to the set's.
func buildFile(f *descriptorpb.FileDescriptorProto, byPath map[string]*descriptorpb.FileDescriptorProto, compiled func(string) bool) (protoreflect.FileDescriptor, error) {
	local := &protoregistry.Files{}
	var add func(path string) error
	add = func(path string) error {
		fp := byPath[path]
		if hostFile(fp, compiled) {
			return nil
		}
		if _, err := local.FindFileByPath(path); err == nil {
			return nil
		}
		for _, dep := range fp.GetDependency() {
			if err := add(dep); err != nil {
				return err
			}
		}
		fd, err := protodesc.NewFile(fp, resolver{local})
		if err != nil {
			return err
		}
		return local.RegisterFile(fd)
	}
	if err := add(f.GetName()); err != nil {
		return nil, err
	}
	return local.FindFileByPath(f.GetName())
}

// hostFile reports whether f is one the host's own copy stands for: a
// google.protobuf file the host has, numinance.plugin.v1, or a compiled
// port.
func hostFile(f *descriptorpb.FileDescriptorProto, compiled func(string) bool) bool {
	pkg := f.GetPackage()
	if pkg == "google.protobuf" || strings.HasPrefix(pkg, "google.protobuf.") {
		_, err := protoregistry.GlobalFiles.FindFileByPath(f.GetName())
		return err == nil
	}
	return pkg == "numinance.plugin.v1" || compiled(pkg)
}

// resolver finds a file or descriptor in the set's files, then in the
// host's own.
type resolver struct{ local *protoregistry.Files }

func (r resolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.local.FindFileByPath(path); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (r resolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.local.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}

// reviewPort checks every method of every service of a port file and
// returns the review; a port with no method is refused.
func reviewPort(fd protoreflect.FileDescriptor) ([]MethodReview, error) {
	var out []MethodReview
	for i := 0; i < fd.Services().Len(); i++ {
		sd := fd.Services().Get(i)
		for j := 0; j < sd.Methods().Len(); j++ {
			md := sd.Methods().Get(j)
			rule, err := checkRule(md)
			if err != nil {
				return nil, err
			}
			out = append(out, MethodReview{Method: string(sd.FullName()) + "/" + string(md.Name()),
				RiskClass: rule.GetRiskClass().String(), ExecutionMode: rule.GetExecutionMode().String(),
				DryRunSupported: rule.GetDryRunSupported(), SideEffect: rule.GetDeclaredSideEffect().String(),
				DeclaredEvidence: rule.GetDeclaredEvidence(), ServerStreaming: rule.GetServerStreaming()})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s declares no service method", fd.Path())
	}
	return out, nil
}

// checkRule: a rule that the host can enforce as written — every enum
// set and defined, no field the host does not know, the stream shape
// consistent with the method, declared evidence a type a plugin may emit.
func checkRule(md protoreflect.MethodDescriptor) (plugin.PortRule, error) {
	name := md.FullName()
	rule, err := plugin.RuleOf(md)
	if err != nil {
		return nil, err
	}
	bad := func(what string) (plugin.PortRule, error) { return nil, fmt.Errorf("method %s: %s", name, what) }
	if len(rule.ProtoReflect().GetUnknown()) > 0 {
		return bad("the rule has fields the host does not know")
	}
	if _, ok := pb.RiskClass_name[int32(rule.GetRiskClass())]; !ok || rule.GetRiskClass() == pb.RiskClass_RISK_CLASS_UNSPECIFIED {
		return bad("risk_class is unset or undefined")
	}
	if _, ok := pb.ExecutionMode_name[int32(rule.GetExecutionMode())]; !ok || rule.GetExecutionMode() == pb.ExecutionMode_EXECUTION_MODE_UNSPECIFIED {
		return bad("execution_mode is unset or undefined")
	}
	if _, ok := pb.SideEffect_name[int32(rule.GetDeclaredSideEffect())]; !ok || rule.GetDeclaredSideEffect() == pb.SideEffect_SIDE_EFFECT_UNSPECIFIED {
		return bad("declared_side_effect is unset or undefined")
	}
	if md.IsStreamingClient() {
		return bad("a client-streaming method cannot be an action (Invoke carries one request)")
	}
	if rule.GetServerStreaming() != md.IsStreamingServer() ||
		(rule.GetServerStreaming() && rule.GetExecutionMode() != pb.ExecutionMode_EXECUTION_MODE_OPERATION) {
		return bad("server_streaming must match the method and needs EXECUTION_MODE_OPERATION")
	}
	for _, typ := range rule.GetDeclaredEvidence() {
		if typ == "" || hostAuthoredType(typ) {
			return bad("declared_evidence names an empty or host-authored record type")
		}
	}
	if _, err := plugin.NewStreamCheck(md, rule); err != nil {
		return bad(err.Error())
	}
	return rule, nil
}

// ReviewCompiled is the review of a port compiled into the host.
func ReviewCompiled(fd protoreflect.FileDescriptor) ([]MethodReview, error) { return reviewPort(fd) }
