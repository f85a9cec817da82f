package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func grpcFrame(flag byte, payload string) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flag
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// guarded is what the guard made of a body: what it handed out, the
// redactions counted, the error that ended it and the recorded cut.
type guarded struct {
	out  []byte
	hits int
	err  error
	cut  *denial
}

func readGuarded(body []byte) guarded {
	ctx, cut := withGRPCCut(context.Background())
	g := guarded{}
	gg := newGRPCGuard(ctx, bytes.NewReader(body), newEchoForms(secretForms(testSecret)), &g.hits, nil)
	g.out, g.err = io.ReadAll(gg)
	g.cut = cut.d
	return g
}

func TestGRPCGuard(t *testing.T) {
	half := len(testSecret) / 2
	for _, tc := range []struct {
		name    string
		body    []byte
		wantErr error
		cut     string
		hits    int
	}{
		{name: "clean", body: append(grpcFrame(0, "hello"), grpcFrame(0, "docs")...)},
		{name: "in a message", body: grpcFrame(0, "token="+testSecret+";"), hits: 1},
		{name: "split across messages", body: append(grpcFrame(0, "a:"+testSecret[:half]), grpcFrame(0, testSecret[half:]+":b")...), hits: 1},
		{name: "compressed", body: grpcFrame(1, "xxxxxx"), wantErr: errGRPCCompressed, cut: CodeUnscannable},
		{name: "too large", body: binary.BigEndian.AppendUint32([]byte{0}, maxGuardedGRPCMessage+1), wantErr: errGRPCTooLarge, cut: CodeUnscannable},
		{name: "cut short", body: grpcFrame(0, "hello")[:7], wantErr: errGRPCFraming},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := readGuarded(tc.body)
			out, hits, err, d := g.out, g.hits, g.err, g.cut
			if !errors.Is(err, tc.wantErr) || hits != tc.hits {
				t.Fatalf("err %v, hits %d; want %v, %d", err, hits, tc.wantErr, tc.hits)
			}
			if (d == nil) != (tc.cut == "") || d != nil && d.code != tc.cut {
				t.Fatalf("cut %+v, want %q", d, tc.cut)
			}
			if tc.wantErr != nil {
				return
			}
			if len(out) != len(tc.body) {
				t.Fatalf("handed out %d bytes of %d: lengths must not change", len(out), len(tc.body))
			}
			if tc.hits == 0 && !bytes.Equal(out, tc.body) {
				t.Fatalf("a clean body was changed: %q", out)
			}
			if half := testSecret[len(testSecret)/2:]; tc.hits > 0 && (bytes.Contains(out, []byte(testSecret)) || bytes.Contains(out, []byte(half))) {
				t.Fatalf("the secret (or its later part) went out: %q", out)
			}
		})
	}
}

// FuzzGRPCGuard: whatever an upstream sends, the guard never panics,
// never hands out the secret, and hands out well-framed messages at
// their own length.
func FuzzGRPCGuard(f *testing.F) {
	f.Add(grpcFrame(0, "hello"))
	f.Add(append(grpcFrame(0, "a:"+testSecret[:9]), grpcFrame(0, testSecret[9:])...))
	f.Add(grpcFrame(1, "zz"))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		g := readGuarded(body)
		out, err := g.out, g.err
		if bytes.Contains(out, []byte(testSecret)) {
			t.Fatalf("the secret went out: %q", out)
		}
		if err == nil && len(out) != len(body) {
			t.Fatalf("a complete body of %d bytes came out as %d", len(body), len(out))
		}
	})
}
