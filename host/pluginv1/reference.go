package pluginv1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-dev/airlock/host"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

// MaxReferenceChunk bounds one ResolveReference chunk.
const MaxReferenceChunk = plugin.MaxReferenceChunk

var referenceName = (&pb.Reference{}).ProtoReflect().Descriptor().FullName()

// findReferences walks a request with the host's descriptor of its type
// and returns every Reference in it.
func findReferences(m protoreflect.Message) []*pb.Reference {
	var out []*pb.Reference
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if m.Descriptor().FullName() == referenceName {
			r := &pb.Reference{}
			b, err := proto.Marshal(m.Interface())
			if err == nil && proto.Unmarshal(b, r) == nil {
				out = append(out, r)
			}
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { walk(mv.Message()); return true })
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(v.Message())
			}
			return true
		})
	}
	walk(m)
	return out
}

// allowedReference returns the input's own copy of the reference the
// plugin asked for (matched by URI and sha256), or an error: not in the
// input, or host_only there — however the plugin spelled it.
func allowedReference(refs []*pb.Reference, asked *pb.Reference) (*pb.Reference, error) {
	for _, r := range refs {
		if r.GetUri() == asked.GetUri() && strings.EqualFold(r.GetSha256(), asked.GetSha256()) {
			if r.GetHostOnly() {
				return nil, errors.New("reference: host_only references are never served")
			}
			return r, nil
		}
	}
	return nil, errors.New("reference: not found in the invocation's request")
}

// verifiedArtifact opens the artifact and checks its sha256 (and size,
// when the reference gives one) before any byte is served.
func verifiedArtifact(store host.Artifacts, r *pb.Reference) (io.ReadCloser, error) {
	rc, err := store.Open(r.GetUri())
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("reference: read: %w", err)
	}
	if !strings.EqualFold(hex.EncodeToString(h.Sum(nil)), r.GetSha256()) || r.GetSize() > 0 && n != r.GetSize() {
		return nil, errors.New("reference: content does not match its sha256")
	}
	return store.Open(r.GetUri())
}
