package control

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// WellKnownResource is where a protected resource's metadata is served
// (RFC 9728): at this path for the listener's origin, and at this path
// followed by the resource's own path for the resource.
const WellKnownResource = "/.well-known/oauth-protected-resource"

// ProtectedResource is an OAuth 2.0 protected resource the control API
// serves (RFC 9728), for the clients that discover how to get a bearer
// JWT for it (the MCP authorization spec): its metadata is served
// without authentication, and a refused request names it in
// WWW-Authenticate. Make it with NewProtectedResource.
type ProtectedResource struct {
	resource *url.URL
	md       resourceMetadata
}

// resourceMetadata is the metadata document (RFC 9728, section 2).
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	BearerMethods        []string `json:"bearer_methods_supported"`
	Scopes               []string `json:"scopes_supported,omitempty"`
}

// NewProtectedResource checks and returns the resource identified by
// resource (an absolute https URL, or http on a loopback address; no
// user info, query or fragment), whose bearer JWTs are issued by
// authorizationServers (their issuer URLs) for scopes (none: not
// advertised).
func NewProtectedResource(resource string, authorizationServers, scopes []string) (*ProtectedResource, error) {
	u, err := CheckResourceURL(resource)
	if err != nil {
		return nil, err
	}
	if len(authorizationServers) == 0 {
		return nil, errors.New("a protected resource needs an authorization server")
	}
	return &ProtectedResource{resource: u, md: resourceMetadata{Resource: u.String(),
		AuthorizationServers: authorizationServers, BearerMethods: []string{"header"}, Scopes: scopes}}, nil
}

// CheckResourceURL parses a resource identifier: an absolute https URL,
// or http on a loopback address, without user info, query or fragment.
func CheckResourceURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return nil, errors.New("not an absolute URL")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("a resource URL has no user info, query or fragment")
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, errors.New("a resource URL is https (http only on a loopback address)")
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the resource identifier.
func (p *ProtectedResource) URL() string { return p.md.Resource }

// MetadataURL is where the resource's metadata is served: the
// well-known path inserted before the resource's path.
func (p *ProtectedResource) MetadataURL() string {
	u := *p.resource
	u.Path, u.RawPath = WellKnownResource+strings.TrimSuffix(p.resource.Path, "/"), ""
	return u.String()
}

// origin is the metadata of the listener's origin, at the well-known
// path itself: the control API as a whole, which takes the same JWTs.
func (p *ProtectedResource) origin() resourceMetadata {
	md := p.md
	u := url.URL{Scheme: p.resource.Scheme, Host: p.resource.Host}
	md.Resource = u.String()
	return md
}

// serve answers a request for the metadata, and reports whether r asked
// for it.
func (p *ProtectedResource) serve(w http.ResponseWriter, r *http.Request) bool {
	var md resourceMetadata
	switch path := strings.TrimSuffix(p.resource.Path, "/"); r.URL.Path {
	case WellKnownResource:
		md = p.origin()
	case WellKnownResource + path:
		md = p.md
	default:
		return false
	}
	// Public and the same for every client: any origin may read it.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return true
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the metadata is read with GET")
		return true
	}
	b, _ := json.Marshal(md)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "max-age=300")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
	return true
}

// challenge is the WWW-Authenticate of a refused request: a request
// for the resource (its path, or below) names its metadata, any other
// the origin's.
func (p *ProtectedResource) challenge(r *http.Request) string {
	md := p.MetadataURL()
	if path := strings.TrimSuffix(p.resource.Path, "/"); path != "" && r.URL.Path != path && !strings.HasPrefix(r.URL.Path, path+"/") {
		u := url.URL{Scheme: p.resource.Scheme, Host: p.resource.Host, Path: WellKnownResource}
		md = u.String()
	}
	return `Bearer realm="airlock-control", resource_metadata="` + md + `"`
}
