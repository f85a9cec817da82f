package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"

	"github.com/airlock-dev/airlock/broker"
)

// Plugins are tenants of each other. A plugin whose own proxy listener
// was handed to the proxy (ServeSandbox: a listener inside its network
// namespace, or at the landlock level a loopback listener of its own,
// which no other sandboxed plugin may connect to — a local process
// outside every sandbox can, and is taken for that plugin, but still
// needs that plugin's handle) is known by every
// connection it opens there, whatever those connections carry: plain
// absolute-form requests, CONNECT tunnels and the HTTP/1.1 requests or
// HTTP/2 streams inside them, WebSocket handshakes. Each credential such
// a connection presents — a handle in Proxy-Authorization or as a
// placeholder, the pass that opens a tunnel — must have been issued to
// that plugin; another plugin's is refused 403 handle_not_this_plugins
// before its grant is used for anything, audited under the plugin that
// sent it (the owner's invocation and intent stay out of the line) and
// counted in airlock_proxy_handle_not_this_plugins_total.
//
// Connections on the shared listener (Serve: the sandbox level off, a
// remote host's relay, external clients) carry no plugin of their own:
// there a credential stands for whoever holds it, as before.

// connPluginKey carries, in a sandbox connection's context, the plugin
// whose listener it came in on.
type connPluginKey struct{}

// withConnPlugin marks ctx, a sandbox listener's base context, with its
// plugin: every request read on its connections has a child context.
func withConnPlugin(ctx context.Context, plugin string) context.Context {
	return context.WithValue(ctx, connPluginKey{}, plugin)
}

// connPlugin is the plugin whose own listener the request with context
// ctx came in on; "" for the shared listener.
func connPlugin(ctx context.Context) string {
	p, _ := ctx.Value(connPluginKey{}).(string)
	return p
}

// foreignCredential checks that the credential g, presented on a
// connection of plugin conn ("" for the shared listener), was issued to
// that plugin. It names the sender in a, never the owner's invocation or
// intent.
func (s *Server) foreignCredential(conn string, g *broker.Grant, a *auditRecord) *denial {
	if conn == "" || g.PluginID == conn {
		return nil
	}
	a.Plugin, a.Invocation, a.Intent, a.HandleFP = conn, "", "", g.Fingerprint
	s.metrics.foreign(conn)
	kind := "handle"
	if g.Pass {
		kind = "pass"
	}
	return deny(CodeHandleNotThisPlugins, "the credential was issued to another plugin: a plugin may use only its own handles and pass").
		withReason(kind + " issued to plugin " + strconv.Quote(g.PluginID) + " presented on plugin " + strconv.Quote(conn) + "'s own listener")
}

// errNoPlugin: ServeSandbox was called without the plugin's name.
var errNoPlugin = errors.New("proxy: ServeSandbox needs the name of the plugin whose listener it serves")

// ServeSandbox serves the connections one plugin opens on l, a TCP
// listener that plugin alone can reach — on the loopback of its network
// namespace (the namespaces level), or any listener its host made for it
// — handed over by its host (directly, or through internal/handoff),
// until ctx ends (gracefully, as Serve) or l is closed. Every
// credential presented on these connections must be plugin's own (see
// handle_not_this_plugins in docs/proxy.md). The listener's port is the
// proxy's own while it is served (proxy_self_dial), so that a plugin
// cannot make the proxy dial its own listener. The background work is
// Serve's: a Server serving only sandbox listeners has none.
func (s *Server) ServeSandbox(ctx context.Context, plugin string, l net.Listener) error {
	if plugin == "" {
		return errNoPlugin
	}
	if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil {
		s.policy.addSelf(ap)
		defer s.policy.removeSelf(ap)
	}
	return s.loop(plugin).Serve(ctx, l)
}
