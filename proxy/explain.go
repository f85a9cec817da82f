package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/broker"
)

var _ broker.Explainer = (*Server)(nil)

// Explain runs the proxy's checks for one request under g without sending
// anything: the target, the destination and method rules, the intent's
// binding, and the addresses the host resolves to. It stops at the first
// check that refuses, naming the denial code the plugin would get.
// (Limits and the secret itself are checked only when a request is sent.)
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
	t, d := parseTarget(r)
	if !step("target", d, fmt.Sprintf("https://%s:%d%s (the proxy re-originates over TLS)", t.host, t.port, t.path)) {
		return ex
	}
	in, ok := s.broker.Intent(g.Intent)
	if !step("intent", map[bool]*denial{false: deny(CodeHandleInvalid, "the intent is no longer configured")}[ok],
		"intent "+g.Intent+" is bound (class "+string(g.Class)+")") {
		return ex
	}
	if !step("destination", checkDestination(g, in, method, t), fmt.Sprintf("%s %s:%d%s is declared", method, t.host, t.port, t.path)) {
		return ex
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
		if reason := s.policy.check(ap); reason != "" {
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
