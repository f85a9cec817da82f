package broker

import "strings"

// HostMatches reports whether a destination's host pattern covers host:
// exactly, or "*.example.com" for exactly one more label. Both are
// normalized (lower case, no trailing dot).
func HostMatches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		label, parent, found := strings.Cut(host, ".")
		return found && label != "" && parent == rest
	}
	return pattern == host
}

// PathMatches reports whether a destination's path prefix covers a
// cleaned path: a prefix ending in "/" matches by string prefix; one that
// does not matches itself or anything below it ("/v1" matches "/v1" and
// "/v1/x", not "/v1x").
func PathMatches(prefix, path string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix) || path+"/" == prefix
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
