package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// serveTracingName names the serve binary measured with tracing on.
func serveTracingName(ratio float64) string {
	return "airlock serve (tracing " + strconv.FormatFloat(ratio*100, 'g', -1, 64) + "%)"
}

// otlpSink serves an OTLP/HTTP receiver that reads and discards every
// export (an empty protobuf answer is a valid ExportTraceServiceResponse)
// for the life of the process; it returns its URL.
func otlpSink() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	return fmt.Sprintf("http://%s", l.Addr())
}
