package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// auditJSON is the audit line as encoding/json encodes it: the reference
// appendLine is held to, byte for byte.
type auditJSON struct {
	Time       time.Time `json:"time"`
	Level      string    `json:"level"`
	Msg        string    `json:"msg"`
	Log        string    `json:"log"`
	Plugin     string    `json:"plugin"`
	Invocation string    `json:"invocation"`
	Intent     string    `json:"intent"`
	HandleFP   string    `json:"handle_fp"`
	Mode       string    `json:"mode"`
	Method     string    `json:"method"`
	Host       string    `json:"host"`
	Port       int       `json:"port"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	Bytes      int64     `json:"bytes"`
	UpstreamMS float64   `json:"upstream_ms"`
	TotalMS    float64   `json:"total_ms"`
	Version    int       `json:"secret_version"`
	Decision   string    `json:"decision"`
	Code       string    `json:"code"`
	Reason     string    `json:"reason"`
	Redactions int       `json:"echo_redactions"`
	Retried    bool      `json:"retried"`
	Processor  string    `json:"processor"`
	TokenCache string    `json:"token_cache"`
	Lease      string    `json:"lease_fp"`
	AddrClass  string    `json:"addr_class"`
	TraceID    string    `json:"trace_id,omitempty"`
}

func referenceLine(t testing.TB, a *auditRecord, now time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as log/slog's JSON handler, which wrote these lines before
	err := enc.Encode(auditJSON{Time: now, Level: "INFO", Msg: "egress", Log: "audit", Plugin: a.Plugin, Invocation: a.Invocation,
		Intent: a.Intent, HandleFP: a.HandleFP, Mode: a.Mode, Method: a.Method, Host: a.Host, Port: a.Port, Path: a.Path,
		Status: a.Status, Bytes: a.BytesOut, UpstreamMS: a.UpstreamMS, TotalMS: a.totalMS(), Version: a.Version,
		Decision: a.decision(), Code: a.Code, Reason: a.Reason, Redactions: a.Redactions, Retried: a.Retried,
		Processor: a.Processor, TokenCache: a.TokenCache, Lease: a.Lease,
		AddrClass: a.AddrClass.String(), TraceID: a.traceID()})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func escapingRecord() *auditRecord {
	return &auditRecord{Plugin: "tick\"ets\\", Invocation: "inv\n1\t\r\b\f\x00\x1f", Intent: "api.<read>&",
		HandleFP: "ab12", Mode: modeIntercept, Method: "GET", Host: "api.example.com", Port: 8443,
		Path: "/v1/x?a&b\u2028\u2029é\xff\xfe", Status: 403, BytesOut: 1 << 40, UpstreamMS: 1.25e-7,
		total: 1234567 * time.Microsecond, Version: 7, Code: CodeDestination, Reason: "bad \"host\" \x7f ☃",
		Redactions: 2, Retried: true, Processor: "hmac", TokenCache: "hit", Lease: "le\u00e9\"fp",
		AddrClass: addrAllowConfigured, tr: &reqTrace{id: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}}}
}

// The hand-written line is byte for byte what encoding/json writes for
// the same record, escapes included.
func TestAuditLineMatchesEncodingJSON(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 3, 4, 500600700, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		name string
		a    *auditRecord
	}{
		{"escapes", escapingRecord()},
		{"zero", &auditRecord{}},
		{"allow", &auditRecord{Plugin: "p", Method: "POST", Status: 200, UpstreamMS: 12.5, total: 13 * time.Millisecond, Mode: modePlain}},
		{"large float", &auditRecord{UpstreamMS: 1e21}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.appendLine(nil, now)
			if want := referenceLine(t, tc.a, now); !bytes.Equal(got, want) {
				t.Fatalf("line differs from encoding/json\n got %s\nwant %s", got, want)
			}
		})
	}
}

// The line has the fields, names and values of the log/slog line the
// proxy wrote before (without the sink), so readers of the audit log read
// it unchanged.
func TestAuditLineMatchesSlogLine(t *testing.T) {
	for _, a := range []*auditRecord{escapingRecord(), everyField()} {
		compareWithSlog(t, a)
	}
}

// everyField sets every exported field of a record, so that a field the
// slog line writes and appendLine forgets (or the reverse) shows.
func everyField() *auditRecord {
	a := &auditRecord{}
	v := reflect.ValueOf(a).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("v-" + name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(7 + i))
		case reflect.Float64:
			f.SetFloat(1.5 + float64(i))
		case reflect.Bool:
			f.SetBool(true)
		}
	}
	return a
}

func compareWithSlog(t *testing.T, a *auditRecord) {
	t.Helper()
	var buf bytes.Buffer
	a.log(slog.New(slog.NewJSONHandler(&buf, nil)).With("log", "audit"))
	var old, now map[string]any
	if err := json.Unmarshal(buf.Bytes(), &old); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a.appendLine(nil, time.Now()), &now); err != nil {
		t.Fatal(err)
	}
	delete(old, "time")
	delete(now, "time")
	if !reflect.DeepEqual(old, now) {
		t.Fatalf("fields differ from the slog line\n got %v\nwant %v", now, old)
	}
}

// FuzzAuditLine: any record's line is what encoding/json writes for it.
func FuzzAuditLine(f *testing.F) {
	a := escapingRecord()
	f.Add(a.Plugin, a.Path, a.Reason, a.Host, a.UpstreamMS, int64(a.total), a.Port, a.Retried)
	f.Add("", "", "", "", 0.0, int64(0), 0, false)
	f.Fuzz(func(t *testing.T, plugin, path, reason, host string, upstreamMS float64, total int64, port int, retried bool) {
		if math.IsNaN(upstreamMS) || math.IsInf(upstreamMS, 0) {
			return // not a duration; encoding/json refuses them
		}
		a := &auditRecord{Plugin: plugin, Path: path, Reason: reason, Host: host, UpstreamMS: upstreamMS,
			total: time.Duration(total), Port: port, Retried: retried, Code: reason}
		now := time.Unix(0, total)
		got := a.appendLine(nil, now)
		if want := referenceLine(t, a, now); !bytes.Equal(got, want) {
			t.Fatalf("line differs from encoding/json\n got %q\nwant %q", got, want)
		}
	})
}
