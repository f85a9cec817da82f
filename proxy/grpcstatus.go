package proxy

import (
	"net/http"
	"strconv"
	"strings"
)

// A gRPC client cannot read the proxy's JSON refusal: it wants an HTTP/2
// response with status 200 whose grpc-status says what went wrong. So a
// refusal of a gRPC call (a request with content-type application/grpc*)
// is a trailers-only response: HTTP 200, content-type application/grpc,
// grpc-status from grpcCode, grpc-message "airlock <code>: <detail>"
// (percent-encoded as the gRPC wire spec asks), and X-Airlock-Error as
// on every refusal. The message carries the refusal code and the fixed
// detail text, never a value from the request. A call cut while it runs
// (its handle revoked) ends with the same fields as trailers.

// gRPC status codes (google.golang.org/grpc/codes), as the wire spells
// them.
const (
	grpcCancelled         = 1
	grpcInvalidArgument   = 3
	grpcDeadlineExceeded  = 4
	grpcPermissionDenied  = 7
	grpcResourceExhausted = 8
	grpcUnimplemented     = 12
	grpcUnavailable       = 14
	grpcUnauthenticated   = 16
	grpcContentTypePrefix = "application/grpc"
	headerGRPCStatus      = "Grpc-Status"
	headerGRPCMessage     = "Grpc-Message"
)

// isGRPC reports whether r is a gRPC call.
func isGRPC(r *http.Request) bool {
	if r == nil || r.ProtoMajor != 2 {
		return false
	}
	return grpcContentType(r.Header.Get("Content-Type"))
}

// isGRPCResponse reports whether resp answers a gRPC call as gRPC (an
// upstream's error page does not).
func isGRPCResponse(req *http.Request, resp *http.Response) bool {
	return isGRPC(req) && grpcContentType(resp.Header.Get("Content-Type"))
}

func grpcContentType(ct string) bool {
	return ct == grpcContentTypePrefix || strings.HasPrefix(ct, grpcContentTypePrefix+"+") || strings.HasPrefix(ct, grpcContentTypePrefix+";")
}

// grpcCode is the gRPC status for a refusal, from the HTTP status the
// refusal has elsewhere: who must act (the plugin's credential, its
// request, the proxy's limits, the upstream) stays readable.
func grpcCode(code string) int {
	switch codeStatus[code] {
	case http.StatusBadRequest:
		return grpcInvalidArgument
	case http.StatusProxyAuthRequired:
		return grpcUnauthenticated
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge, http.StatusTooManyRequests:
		return grpcResourceExhausted
	case http.StatusNotImplemented, http.StatusMethodNotAllowed:
		return grpcUnimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return grpcUnavailable
	case http.StatusGatewayTimeout:
		return grpcDeadlineExceeded
	case statusClientClosed:
		return grpcCancelled
	}
	return grpcPermissionDenied
}

// grpcStatusFields are the grpc-status and grpc-message values for d.
// A gRPC answer has no body: the declared destinations are in the
// message.
func grpcStatusFields(d *denial) (status, message string) {
	msg := "airlock " + d.code + ": " + d.detail
	if len(d.declared) > 0 {
		msg += " (declared: " + destinationsText(d.declared) + ")"
	}
	return strconv.Itoa(grpcCode(d.code)), encodeGRPCMessage(msg)
}

// grpcResponse is d as a trailers-only gRPC response.
func (d *denial) grpcResponse(req *http.Request) *http.Response {
	status, msg := grpcStatusFields(d)
	h := http.Header{}
	h.Set("Content-Type", grpcContentTypePrefix)
	h.Set(headerGRPCStatus, status)
	h.Set(headerGRPCMessage, msg)
	h.Set(HeaderError, d.code)
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK",
		Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: h, Body: http.NoBody, ContentLength: 0, Request: req,
	}
}

// setGRPCTrailers ends a gRPC response already under way with d's
// status, as trailers; before the head is written they go in it.
func setGRPCTrailers(w http.ResponseWriter, d *denial) {
	status, msg := grpcStatusFields(d)
	h := w.Header()
	h.Set(http.TrailerPrefix+headerGRPCStatus, status)
	h.Set(http.TrailerPrefix+headerGRPCMessage, msg)
	h.Set(http.TrailerPrefix+HeaderError, d.code)
}

// encodeGRPCMessage percent-encodes s as the gRPC wire spec asks for
// grpc-message: every byte outside printable ASCII, and '%'.
func encodeGRPCMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)>>4, 16)+strconv.FormatUint(uint64(c)&15, 16)))
	}
	return b.String()
}
