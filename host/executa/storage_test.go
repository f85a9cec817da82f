package executa

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/executa/aps"
)

type callResult struct {
	Result    map[string]any `json:"result"`
	Code      *float64       `json:"code"`
	ErrorCode string         `json:"errorCode"`
	Message   string         `json:"message"`
}

func rpcs(t *testing.T, p *Process, req InvokeRequest, calls ...string) []callResult {
	t.Helper()
	req.Tool = "rpcs"
	req.Arguments = json.RawMessage(`{"calls":[` + strings.Join(calls, ",") + `]}`)
	r, err := p.Invoke(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Calls []callResult `json:"calls"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Calls
}

func code(c callResult) string {
	if c.Code == nil {
		return "ok"
	}
	return fmt.Sprintf("%d %s", int(*c.Code), c.ErrorCode)
}

func TestStorageService(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "aps.db")
	kv, err := aps.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := time.Now()
	kv.Now = func() time.Time { return clk }
	start := func() *Process {
		p, err := Start(context.Background(), py("good"), Options{Broker: f.b, Secrets: f.b, Tokens: broker.LocalMinter{Issuer: f.issuer},
			Verifier: f.verifier, EgressProxy: f.proxy, KV: kv})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start()
	user := InvokeRequest{UserID: "u-1"}
	res := rpcs(t, p, user,
		`{"method":"storage/set","params":{"key":"k1","value":{"a":1},"scope":"user"}}`,
		`{"method":"storage/get","params":{"key":"k1","scope":"user"}}`,
		`{"method":"storage/set","params":{"key":"k1","value":2,"scope":"user","if_match":"stale"}}`,
		`{"method":"storage/get","params":{"key":"missing","scope":"user"}}`,
		`{"method":"storage/set","params":{"key":"big","value":"`+strings.Repeat("x", 70<<10)+`","scope":"user"}}`,
		`{"method":"storage/set","params":{"key":"k2","value":"short-lived","scope":"user","ttl_seconds":60}}`,
		`{"method":"storage/list","params":{"prefix":"k","limit":1,"scope":"user"}}`,
		`{"method":"storage/get","params":{"key":"k1"}}`,
		`{"method":"storage/get","params":{"key":"k1","scope":"user"},"swap_tokens":true}`,
		`{"method":"storage/set","params":{"key":"","value":1,"scope":"user"}}`,
	)
	want := []string{"ok", "ok", "-32023 PRECONDITION_FAILED", "ok", "-32025 VALUE_TOO_LARGE", "ok", "ok",
		"-32021 STORAGE_NOT_GRANTED", "-32021 STORAGE_NOT_GRANTED", "-32028 INVALID_REQUEST"}
	for i, w := range want {
		if got := code(res[i]); got != w {
			t.Errorf("call %d: %s, want %s", i, got, w)
		}
	}
	// The refusal names what the token grants (the fix), never a scope
	// name the plugin made up.
	if !strings.Contains(res[7].Message, "it grants: user, tool") {
		t.Errorf("scope refusal: %q", res[7].Message)
	}
	if res[1].Result["exists"] != true || res[1].Result["etag"] != res[0].Result["etag"] || fmt.Sprint(res[1].Result["value"]) != "map[a:1]" {
		t.Fatalf("get after set: %v", res[1].Result)
	}
	if res[3].Result["exists"] != false || res[3].Result["value"] != nil || res[3].Result["etag"] != nil {
		t.Fatalf("miss: %v", res[3].Result)
	}
	items := res[6].Result["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["key"] != "k1" || res[6].Result["next_cursor"] == nil {
		t.Fatalf("list page 1: %v", res[6].Result)
	}
	cursor := res[6].Result["next_cursor"].(string)
	etag := res[0].Result["etag"].(string)

	// A second invoke: the cursor, if_match with the right etag, the app
	// scope with attested claims, TTL expiry, delete.
	clk = clk.Add(2 * time.Minute)
	res = rpcs(t, p, InvokeRequest{UserID: "u-1", AppID: "app-9", AppSlug: "notes"},
		`{"method":"storage/list","params":{"prefix":"k","limit":1,"scope":"user","cursor":"`+cursor+`"}}`,
		`{"method":"storage/set","params":{"key":"k1","value":3,"scope":"user","if_match":"`+etag+`"}}`,
		`{"method":"storage/set","params":{"key":"note","value":"app data"}}`,
		`{"method":"storage/get","params":{"key":"k2","scope":"user"}}`,
		`{"method":"storage/delete","params":{"key":"k1","scope":"user"}}`,
		`{"method":"storage/get","params":{"key":"k1","scope":"user"}}`,
	)
	if code(res[0]) != "ok" || len(res[0].Result["items"].([]any)) != 0 {
		t.Fatalf("list page 2 (k2 expired): %v %s", res[0].Result, code(res[0]))
	}
	if code(res[1]) != "ok" || code(res[2]) != "ok" || res[3].Result["exists"] != false ||
		res[4].Result["deleted"] != true || res[5].Result["exists"] != false {
		t.Fatalf("second invoke: %+v", res)
	}

	// The store survives a restart of the plugin and of the store.
	rpcs(t, p, user, `{"method":"storage/set","params":{"key":"durable","value":"kept","scope":"user"}}`)
	p.Shutdown()
	kv.Close()
	if kv, err = aps.Open(path); err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	p = start()
	defer p.Shutdown()
	res = rpcs(t, p, user, `{"method":"storage/get","params":{"key":"durable","scope":"user"}}`)
	if res[0].Result["value"] != "kept" {
		t.Fatalf("after restart: %v", res[0].Result)
	}
	// Another user's scope is another bucket.
	res = rpcs(t, p, InvokeRequest{UserID: "u-2"}, `{"method":"storage/get","params":{"key":"durable","scope":"user"}}`)
	if res[0].Result["exists"] != false {
		t.Fatal("a user read another user's value")
	}

	// 200 storage RPCs per invoke.
	calls := make([]string, 201)
	for i := range calls {
		calls[i] = `{"method":"storage/get","params":{"key":"x","scope":"user"}}`
	}
	res = rpcs(t, p, user, calls...)
	if code(res[199]) != "ok" || code(res[200]) != "-32026 RATE_LIMITED" {
		t.Fatalf("rpc 200: %s, 201: %s", code(res[199]), code(res[200]))
	}
}

func TestStorageQuota(t *testing.T) {
	f := newFixture(t)
	kv, err := aps.Open(filepath.Join(t.TempDir(), "aps.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	kv.Quota = 200
	p, err := Start(context.Background(), py("good"), Options{Broker: f.b, Secrets: f.b, Tokens: broker.LocalMinter{Issuer: f.issuer}, Verifier: f.verifier,
		EgressProxy: f.proxy, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	v := `"` + strings.Repeat("q", 100) + `"`
	res := rpcs(t, p, InvokeRequest{UserID: "u-q"},
		`{"method":"storage/set","params":{"key":"a","value":`+v+`,"scope":"user"}}`,
		`{"method":"storage/set","params":{"key":"b","value":`+v+`,"scope":"user"}}`,
		`{"method":"storage/delete","params":{"key":"a","scope":"user"}}`,
		`{"method":"storage/set","params":{"key":"b","value":`+v+`,"scope":"user"}}`)
	if code(res[0]) != "ok" || code(res[1]) != "-32024 QUOTA_EXCEEDED" || code(res[2]) != "ok" || code(res[3]) != "ok" {
		t.Fatalf("quota: %s %s %s %s", code(res[0]), code(res[1]), code(res[2]), code(res[3]))
	}
	if u := kv.Usage("user/u-q"); u <= 0 || u > 200 {
		t.Fatalf("usage %d", u)
	}
}
