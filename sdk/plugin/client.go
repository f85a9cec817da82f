package plugin

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// DialHost connects to the HostService the host named in HostAddrEnv
// ("unix:" and an absolute path). Every call made on the client presents
// this provider's key (PluginKeyEnv, read once and then removed from the
// environment) and, when made with the context of an Invoke (its
// stream's Context, or a context derived from it), that invocation's key:
// the host refuses a call whose invocation key does not belong to the
// invocation_id it names. A call made with context.Background() for an
// invocation is refused; use context.WithoutCancel(ctx) for work that
// must outlive the Invoke's cancellation.
func DialHost() (pluginv1.HostServiceClient, *grpc.ClientConn, error) {
	key, err := pluginKey()
	if err != nil {
		return nil, nil, err
	}
	return dialHost(os.Getenv(HostAddrEnv), key)
}

func dialHost(addr, key string) (pluginv1.HostServiceClient, *grpc.ClientConn, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok || !strings.HasPrefix(path, "/") {
		return nil, nil, errors.New(HostAddrEnv + " must be unix: and an absolute path")
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, hostCallOptions(key)...)
	conn, err := grpc.NewClient("unix://"+path, opts...)
	if err != nil {
		return nil, nil, err
	}
	return pluginv1.NewHostServiceClient(conn), conn, nil
}

// ProxyClient returns an HTTP client that sends every request through the
// egress proxy with the handle as the proxy user name. Use http:// URLs:
// the proxy adds TLS.
func ProxyClient(handle, egressProxy string) *http.Client {
	u := &url.URL{Scheme: "http", Host: egressProxy, User: url.User(handle)}
	return &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(u)},
		// The proxy passes redirects back; following one through it is a
		// new request that must be declared too.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// DescriptorSet builds the GetDescriptors answer for a port file: the file
// and everything it imports, dependencies first.
func DescriptorSet(file protoreflect.FileDescriptor) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(file)
	return set
}
