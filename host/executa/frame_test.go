package executa

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReader(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", MaxFrame) + `"}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2.0"}}`,
		`Loading model weights...`,
		`{"jsonrpc":"1.0","id":2,"result":1}`,
		big,
		`{"jsonrpc":"2.0","method":"executa/progress","params":{"p":1}}`,
		`[1,2,3]`,
		`{"jsonrpc":"2.0","result":1}`,
		`{"jsonrpc":"2.0","id":"x","method":"sampling/createMessage","params":{}}`,
	}, "\n") + "\n"
	fr := NewFrameReader(strings.NewReader(in))
	want := []error{nil, ErrNotJSON, ErrNotJSONRPC, ErrFrameTooLarge, nil, ErrNotJSON, ErrNotJSONRPC, nil}
	for i, w := range want {
		m, err := fr.Next()
		if !errors.Is(err, w) {
			t.Fatalf("frame %d: err %v, want %v", i, err, w)
		}
		if w == nil && m == nil {
			t.Fatalf("frame %d: no message", i)
		}
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func FuzzParseFrame(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"x"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"__file_transport":"/tmp/x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseFrame(b)
		if err != nil {
			return
		}
		if m.JSONRPC != "2.0" || m.Method == "" && len(m.ID) == 0 {
			t.Fatalf("accepted %q", b)
		}
	})
}
