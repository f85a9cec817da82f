// Command attacker is another process on the machine — a plugin of
// another host, or any process of the victim plugin's uid — that found a
// plugin's sockets by path (as /proc/net/unix lists them) and calls them
// as if it were the host (on the provider's socket) and the plugin (on
// its HostService socket). It prints one JSON object: its pid and the
// gRPC code of each call.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/sdk/plugin"
)

func main() {
	provider := flag.String("provider", "", "the victim provider's socket (p.sock)")
	hostSock := flag.String("host", "", "the victim's HostService socket (h.sock)")
	invocation := flag.String("invocation", "", "an invocation id in flight for the victim")
	hostKey := flag.String("host-key", "", "a value to present as the host's key on the provider's socket")
	pluginKey := flag.String("plugin-key", "", "a value to present as the plugin's key on HostService")
	flag.Parse()

	out := map[string]any{"pid": os.Getpid()}
	codes := map[string]string{}
	out["codes"] = codes
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pctx := ctx
	if *hostKey != "" {
		pctx = metadata.AppendToOutgoingContext(ctx, plugin.HostKeyMetadata, *hostKey)
	}
	pc, err := grpc.NewClient("unix://"+*provider, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer pc.Close()
	p := pluginv1.NewPluginServiceClient(pc)
	_, err = p.Health(pctx, &pluginv1.HealthRequest{})
	codes["Health"] = code(err)
	_, err = p.GetManifest(pctx, &pluginv1.GetManifestRequest{})
	codes["GetManifest"] = code(err)
	in, _ := anypb.New(&ticketsv1.ListTicketsRequest{Project: "core"})
	st, err := p.Invoke(pctx, &pluginv1.InvokeRequest{Envelope: &pluginv1.Envelope{Method: "numinance.ports.tickets.v1.Tickets/ListTickets",
		Request: in, Context: &pluginv1.ActionContext{InvocationId: *invocation}}})
	if err == nil {
		for err == nil {
			_, err = st.Recv()
		}
		if err == io.EOF {
			err = nil
		}
	}
	codes["Invoke"] = code(err)
	_, err = p.Shutdown(pctx, &pluginv1.ShutdownRequest{})
	codes["Shutdown"] = code(err)

	hctx := ctx
	if *pluginKey != "" {
		hctx = metadata.AppendToOutgoingContext(ctx, plugin.PluginKeyMetadata, *pluginKey)
	}
	hc, err := grpc.NewClient("unix://"+*hostSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer hc.Close()
	h := pluginv1.NewHostServiceClient(hc)
	_, err = h.Log(hctx, &pluginv1.LogRequest{InvocationId: *invocation, Level: "info", ReasonCode: "hello"})
	codes["Log"] = code(err)
	_, err = h.RequestCredential(hctx, &pluginv1.RequestCredentialRequest{InvocationId: *invocation, Intent: "tickets.write"})
	codes["RequestCredential"] = code(err)
	_, err = h.EmitEvidence(hctx, &pluginv1.EmitEvidenceRequest{InvocationId: *invocation, RecordType: "tickets.created",
		EmitKey: "forged", Payload: []byte(`{}`)})
	codes["EmitEvidence"] = code(err)
	_, err = h.ReportProgress(hctx, &pluginv1.ReportProgressRequest{InvocationId: *invocation, Completed: 1, Total: 1})
	codes["ReportProgress"] = code(err)

	json.NewEncoder(os.Stdout).Encode(out)
}

func code(err error) string { return status.Code(err).String() }

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
