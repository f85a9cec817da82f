package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errBridgeCall is what a local client is told of a call the host's
// endpoint did not answer with a result (the session gone, say): the
// bridge's own words, never the remote error's text.
var errBridgeCall = errors.New("the Airlock host did not answer the call")

// ErrEndpointOff: the host answers, but serves no MCP endpoint.
var ErrEndpointOff = errors.New("the Airlock host serves no MCP endpoint: set host.mcp.enabled: true in its config and restart it (docs/mcp.md)")

// endpointOff tells, after a failed connect, whether the host answered
// at endpoint with 404: the control API is up with MCP turned off.
func endpointOff(ctx context.Context, endpoint string, hc *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, http.NoBody)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNotFound
}

// Bridge serves, on local (a stdio transport, for an agent that starts
// `airlock mcp` as its MCP server), the tools of the host's MCP endpoint
// at endpoint, reached with hc, which authenticates as the control API
// expects (a token file, a client certificate, the unix socket's peer):
// the host sees the principal hc's credential names, and every call
// goes through its invoke path. Tools, results, refusals, pending
// approvals and progress pass through unchanged; a list change on the
// host becomes one on local. Bridge returns when the local session
// ends, the host's session ends, or ctx is done.
func Bridge(ctx context.Context, local mcp.Transport, endpoint string, hc *http.Client, version string) error {
	if version == "" {
		version = "dev"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &bridge{tools: map[string]bool{}, resync: make(chan struct{}, 1)}
	client := mcp.NewClient(&mcp.Implementation{Name: "airlock-mcp-bridge", Version: version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case b.resync <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: b.forwardProgress,
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		if endpointOff(ctx, endpoint, hc) {
			return ErrEndpointOff
		}
		return fmt.Errorf("connecting to the host's MCP endpoint: %w", err)
	}
	defer cs.Close()
	b.cs = cs
	instructions := instructions
	if r := cs.InitializeResult(); r != nil && r.Instructions != "" {
		instructions = r.Instructions
	}
	b.srv = mcp.NewServer(&mcp.Implementation{Name: "airlock", Version: version}, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	b.srv.AddReceivingMiddleware(noEcho)
	if err := b.sync(ctx); err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		hostGone atomic.Bool
	)
	wg.Go(func() {
		// The host's session ending (the host stopped) ends the bridge.
		_ = cs.Wait()
		if ctx.Err() == nil {
			hostGone.Store(true)
		}
		cancel()
	})
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-b.resync:
				_ = b.sync(ctx) // a failed listing keeps the last list until the next change
			}
		}
	})
	err = b.srv.Run(ctx, local)
	cancel()
	_ = cs.Close()
	wg.Wait()
	switch {
	case hostGone.Load():
		return errors.New("the Airlock host ended the MCP session")
	case errors.Is(err, context.Canceled):
		return nil // the caller's context ended
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrClosedPipe):
		return nil // the agent closed its end
	default:
		return err
	}
}

// bridge is one local session's view of the host's endpoint.
type bridge struct {
	cs     *mcp.ClientSession
	srv    *mcp.Server
	resync chan struct{}

	mu    sync.Mutex
	tools map[string]bool // names listed on srv
	// progress maps a progress token of a call in flight to the local
	// session that asked for progress.
	progress sync.Map
}

// sync lists the host's tools and makes srv list the same.
func (b *bridge) sync(ctx context.Context) error {
	want := map[string]*mcp.Tool{}
	for t, err := range b.cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the host's tools: %w", err)
		}
		want[t.Name] = t
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var gone []string
	for name := range b.tools {
		if want[name] == nil {
			gone = append(gone, name)
			delete(b.tools, name)
		}
	}
	if len(gone) > 0 {
		b.srv.RemoveTools(gone...)
	}
	for name, t := range want {
		b.tools[name] = b.add(t)
	}
	return nil
}

// add lists t locally, reporting whether the SDK took it (it panics on a
// schema it refuses; the host's server took the same one).
func (b *bridge) add(t *mcp.Tool) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	b.srv.AddTool(t, b.call(t.Name))
	return true
}

// call forwards a tools/call to the host: the arguments as the local
// client sent them, its progress token, and the host's result as is.
func (b *bridge) call(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments}
		if tok := req.Params.GetProgressToken(); tok != nil {
			// As the client sent it: a JSON number arrives as a float64,
			// which SetProgressToken refuses (it panics).
			p.Meta = mcp.Meta{"progressToken": tok}
			b.progress.Store(tok, req.Session)
			defer b.progress.Delete(tok)
		}
		res, err := b.cs.CallTool(ctx, p)
		if err != nil {
			return nil, errBridgeCall
		}
		return res, nil
	}
}

// forwardProgress hands the host's progress notification to the local
// session whose call it is about.
func (b *bridge) forwardProgress(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
	if ss, ok := b.progress.Load(r.Params.ProgressToken); ok {
		_ = ss.(*mcp.ServerSession).NotifyProgress(ctx, r.Params)
	}
}
