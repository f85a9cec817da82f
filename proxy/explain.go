package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/broker"
)

var _ broker.Explainer = (*Server)(nil)

// Explain runs the proxy's checks for one request under g without sending
// anything: the mode (an http:// URL is an absolute-form request; an
// https:// one goes through an intercepted CONNECT, whose admission is
// checked first), the target, the destination and method rules, the
// intent's binding, and the addresses the host resolves to. It stops at
// the first check that refuses, naming the denial code the plugin would
// get. g may be a plugin pass: it opens tunnels, and a request inside
// still needs its own handle. (Limits and the secret itself are checked
// only when a request is sent.)
func (s *Server) Explain(ctx context.Context, g *broker.Grant, method, rawURL string) broker.Explanation {
	var ex broker.Explanation
	step := func(check string, d *denial, ok string) bool {
		if d != nil {
			ex.Steps = append(ex.Steps, broker.ExplainStep{Check: check, Detail: d.code + ": " + d.detail})
			ex.Code = d.code
			return false
		}
		ex.Steps = append(ex.Steps, broker.ExplainStep{Check: check, OK: true, Detail: ok})
		return true
	}
	method = strings.ToUpper(method)
	r, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		step("target", deny(CodeBadRequest, "not a method and URL"), "")
		return ex
	}
	if r.URL.Scheme == "https" {
		if !s.explainConnect(r, g, step) {
			return ex
		}
	} else {
		step("mode", nil, "plain: an absolute-form request (HTTP_PROXY); the proxy adds TLS")
	}
	if g.Pass {
		step("handle", deny(CodePassNotAHandle, "this is a plugin pass: it opens CONNECT tunnels only; the request needs its own handle (explain that handle)"), "")
		return ex
	}
	t, d := parseTarget(r)
	if !step("target", d, fmt.Sprintf("https://%s:%d%s (the proxy re-originates over TLS)", t.host, t.port, t.path)) {
		return ex
	}
	in, ok := s.broker.Intent(g.Intent)
	if !step("intent", map[bool]*denial{false: deny(CodeHandleInvalid, "the intent is no longer configured")}[ok],
		"intent "+g.Intent+" is bound (class "+string(g.Class)+")") {
		return ex
	}
	if d, ok := explainDestination(g, in, method, t); !step("destination", d, ok) {
		return ex
	}
	if region := in.RegionOf(t.host, t.port, t.path); region != "" || len(g.Residency) > 0 {
		ok := "region " + region + "; the handle has no residency"
		if region == "" {
			ok = "no region"
		} else if len(g.Residency) > 0 {
			ok = "region " + region + " is in the handle's residency"
		}
		if !step("residency", checkResidency(g, in, t), ok) {
			return ex
		}
	}
	addrs, err := s.dialer.resolver.LookupNetIP(ctx, "ip", t.host)
	if ip, perr := netip.ParseAddr(t.host); perr == nil {
		addrs, err = []netip.Addr{ip}, nil
	}
	if err != nil || len(addrs) == 0 {
		step("address", deny(CodeUpstreamUnreachable, "the host does not resolve"), "")
		return ex
	}
	var allowed, refused []string
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(t.port))
		if class, reason := s.policy.check(ap); !class.allowed() {
			refused = append(refused, ap.Addr().String()+" ("+reason+")")
		} else {
			allowed = append(allowed, ap.Addr().String())
		}
	}
	if len(allowed) == 0 {
		step("address", deny(CodeAddressNotAllowed, "every address of the host is refused: "+strings.Join(refused, ", ")), "")
		return ex
	}
	detail := "dials " + strings.Join(allowed, ", ") + " on port " + strconv.Itoa(t.port)
	if len(refused) > 0 {
		detail += "; refused: " + strings.Join(refused, ", ")
	}
	step("address", nil, detail)
	ex.Allowed = true
	return ex
}

// explainDestination is the destination step: checkDestination, with
// the destinations that were not met listed (the operator reads this).
// A grant without destinations is an intent explained without a handle
// whose binding declares none: a handle's would be its plugin's
// manifest's, unknown here, so only the binding and the class are
// checked, and the step says so.
func explainDestination(g *broker.Grant, in broker.Intent, method string, t target) (*denial, string) {
	ok := fmt.Sprintf("%s %s:%d%s is declared", method, t.host, t.port, t.path)
	if len(g.Destinations) == 0 {
		stand := *g
		stand.Destinations = []broker.Destination{{Host: t.host, Port: t.port}}
		g = &stand
		ok = fmt.Sprintf("%s %s:%d%s is allowed by the intent binding; a handle's destinations are its plugin's manifest's "+
			"(explain an issued handle with --handle-fp to check them)", method, t.host, t.port, t.path)
	}
	d := checkDestination(g, in, method, t)
	if d == nil || (d.code != CodeDestination && d.code != CodeMethodNotDeclared) {
		return d, ok
	}
	e := *d
	switch {
	case d.declared != nil:
		e.detail = "the destination is not declared for this handle, which declares " + destinationsText(d.declared)
		if d.code == CodeMethodNotDeclared {
			e.detail = "the method is not declared for this destination; the handle declares " + destinationsText(d.declared)
		}
	case len(in.Destinations) > 0:
		e.detail = d.detail + "; the intent binding allows " + destinationsText(in.Destinations)
	}
	return &e, ok
}

// explainConnect checks what a CONNECT for r's https:// URL would meet,
// and turns r into the absolute-form request it stands for inside the
// tunnel, as tunnel.adopt does.
func (s *Server) explainConnect(r *http.Request, g *broker.Grant, step func(string, *denial, string) bool) bool {
	if s.ca.Load() == nil {
		return step("mode", deny(CodeConnectNotAllowed, "https:// needs CONNECT, which is not enabled (proxy.intercept): send the http:// URL; the proxy adds TLS"), "")
	}
	port := 443
	if p := r.URL.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	}
	authority := net.JoinHostPort(r.URL.Hostname(), strconv.Itoa(port))
	step("mode", nil, "intercepted CONNECT to "+authority+"; each request inside the tunnel is checked as a plain one")
	creq := &http.Request{Method: http.MethodConnect, Host: authority, Header: http.Header{}}
	a := &auditRecord{}
	host, d := s.admitPlace(creq, a)
	if d != nil {
		return step("connect", d, "")
	}
	in, ok := broker.Intent{}, true
	if !g.Pass {
		in, ok = s.broker.Intent(g.Intent)
	}
	if !ok {
		return step("connect", deny(CodeHandleInvalid, "the intent is no longer configured"), "")
	}
	if len(g.Destinations) > 0 && !declaresPlace(g.Destinations, host, port) {
		return step("connect", deny(CodeDestination, "the CONNECT host and port are not declared for this handle; it declares "+destinationsText(g.Destinations)), "")
	}
	if len(in.Destinations) > 0 && !declaresPlace(in.Destinations, host, port) {
		return step("connect", deny(CodeDestination, "the CONNECT host and port are outside the intent binding's destinations: "+destinationsText(in.Destinations)), "")
	}
	what := "the handle"
	if g.Pass {
		what = "the pass"
	}
	step("connect", nil, what+" declares "+authority+": the tunnel opens")
	u := *r.URL
	u.Scheme, u.Host = "http", host
	if port != 443 {
		u.Host = authority
	}
	r.URL, r.Host = &u, u.Host
	return true
}
