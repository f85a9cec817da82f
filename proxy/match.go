package proxy

import (
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/broker"
)

// safeMethods are the only methods a read-class intent may use.
var safeMethods = []string{"GET", "HEAD", "OPTIONS"}

// checkDestination decides whether method to t is allowed for grant g
// and its intent binding in.
func checkDestination(g *broker.Grant, in broker.Intent, method string, t target) *denial {
	if g.Class == broker.ClassRead && !slices.Contains(safeMethods, method) {
		return deny(CodeMethodForIntent, "a read-class intent allows only GET, HEAD and OPTIONS")
	}
	if d := matchAny(g.Destinations, method, t); d != nil {
		// The plugin sees its own handle's destinations: what it may
		// reach instead.
		d.detail += "; \"declared\" lists the handle's destinations"
		return d.withDeclared(g.Destinations)
	}
	if len(in.Destinations) > 0 {
		if d := matchAny(in.Destinations, method, t); d != nil {
			return d.withReason("outside the intent binding's destinations: " + d.auditReason())
		}
	}
	if t.literal != "" && t.literal != t.path {
		// The path is sent as it came, so it must be declared also as
		// an upstream that resolves nothing (S3) reads it:
		// /other/../bucket/key is bucket "other" there.
		lit := t
		lit.path = t.literal
		if matchAny(g.Destinations, method, lit) != nil || len(in.Destinations) > 0 && matchAny(in.Destinations, method, lit) != nil {
			return deny(CodePathNotAllowed, "the path's dot or empty segments move it across a declared path prefix; send the path without them").
				withReason("the path as sent is outside the declared prefixes, the resolved path inside")
		}
	}
	return nil
}

// matchAny returns nil if some destination allows the request, else the
// most specific denial (a method mismatch on a matching place beats "no
// such place").
func matchAny(ds []broker.Destination, method string, t target) *denial {
	placeMatched := false
	for _, d := range ds {
		if !broker.HostMatches(d.Host, t.host) || d.Port != t.port || !broker.PathMatches(d.PathPrefix, t.path) {
			continue
		}
		placeMatched = true
		if len(d.Methods) == 0 || slices.Contains(d.Methods, method) {
			return nil
		}
	}
	if placeMatched {
		return deny(CodeMethodNotDeclared, "the method is not declared for this destination")
	}
	return deny(CodeDestination, "the destination (host, port, path) is not declared for this handle")
}

// declaresPlace reports whether some destination covers host and port,
// whatever its path and methods: what a CONNECT must show before the
// requests inside it are checked one by one.
func declaresPlace(ds []broker.Destination, host string, port int) bool {
	for _, d := range ds {
		if broker.HostMatches(d.Host, host) && d.Port == port {
			return true
		}
	}
	return false
}

// destinationsText lists ds as an operator (or the plugin they were
// declared for) reads them.
func destinationsText(ds []broker.Destination) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ", ")
}
