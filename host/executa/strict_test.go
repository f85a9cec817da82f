package executa

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// A frame that repeats a key, or holds two keys differing only in case,
// anywhere in it, is never acted on: a response becomes a refusal, a
// request is refused with DUPLICATE_KEY, a notification is dropped.
func TestParseFrameDuplicateKeys(t *testing.T) {
	m, err := ParseFrame([]byte(`{"jsonrpc":"2.0","id":3,"result":{"success":true,"data":{"a":1,"a":2,"A":3}}}`))
	if err != nil || m.Error != duplicateKeyRefused || len(m.Result) != 0 || string(m.ID) != "3" {
		t.Fatalf("response: %+v %v", m, err)
	}
	m, err = ParseFrame([]byte(`{"jsonrpc":"2.0","id":"r1","method":"storage/set","params":{"key":"k","value":{"a":1,"A":2}}}`))
	if err != nil || !m.duplicateKey || m.Params != nil || m.Method != "storage/set" {
		t.Fatalf("request: %+v %v", m, err)
	}
	if _, err := ParseFrame([]byte(`{"jsonrpc":"2.0","method":"executa/progress","params":{"n":1,"N":2}}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("notification: %v", err)
	}
	if m, err := ParseFrame([]byte(`{"jsonrpc":"2.0","JSONRPC":"2.0","id":1,"result":{}}`)); err != nil || m.Error != duplicateKeyRefused {
		t.Fatalf("a repeated envelope key: %+v %v", m, err)
	}
	if _, err := ParseManifest(json.RawMessage(`{"version":"1.0.0","tools":[{"name":"a","Name":"b"}]}`)); err == nil {
		t.Fatal("a describe result with a case-variant key was accepted")
	}
}

// End to end: the plugin's result with {"a":1,"a":2,"A":3} fails the
// invoke with ErrDuplicateKey, and a storage/set whose value repeats a
// key is refused before it is stored.
func TestDuplicateKeysFromPlugin(t *testing.T) {
	f := newFixture(t)
	p, err := f.start(t, py("good"), Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	r, err := p.Invoke(ctx, InvokeRequest{Tool: "dupkeys", Deadline: deadline, Arguments: json.RawMessage(`{"where":"result"}`)})
	if !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("result with duplicate keys: %+v %v", r, err)
	}
	r, err = p.Invoke(ctx, InvokeRequest{Tool: "dupkeys", Deadline: deadline, Arguments: json.RawMessage(`{"where":"request"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d := data(t, r); d["errorCode"] != "DUPLICATE_KEY" || d["code"] != float64(CodeInvalidRequest) {
		t.Fatalf("storage/set with duplicate keys: %v", d)
	}
}
