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
		return d
	}
	if len(in.Destinations) > 0 {
		if d := matchAny(in.Destinations, method, t); d != nil {
			return d.withReason("outside the intent binding's destinations: " + d.auditReason())
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
		if !hostMatches(d.Host, t.host) || d.Port != t.port || !pathMatches(d.PathPrefix, t.path) {
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

// hostMatches: exact, or "*.example.com" for exactly one more label.
// declaresPlace reports whether some destination covers host and port,
// whatever its path and methods: what a CONNECT must show before the
// requests inside it are checked one by one.
func declaresPlace(ds []broker.Destination, host string, port int) bool {
	for _, d := range ds {
		if hostMatches(d.Host, host) && d.Port == port {
			return true
		}
	}
	return false
}

func hostMatches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		label, parent, found := strings.Cut(host, ".")
		return found && label != "" && parent == rest
	}
	return pattern == host
}

// pathMatches: a prefix ending in "/" matches by string prefix; one that
// does not matches itself or anything below it ("/v1" matches "/v1" and
// "/v1/x", not "/v1x").
func pathMatches(prefix, path string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix) || path+"/" == prefix
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
