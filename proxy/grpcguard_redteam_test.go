package proxy

import (
	"bytes"
	"testing"
)

// A secret split across messages must not go out as a long prefix in
// the earlier message: an upstream that echoed it in two messages split
// one byte before its end handed the plugin all of it but one byte. The
// start of a form at a message's end (minEchoLen bytes or more, counting
// earlier messages' ends) is masked, so at most minEchoLen-1 bytes of a
// secret's start can go out, whatever the split.
func TestMessageGuardSplitPrefix(t *testing.T) {
	n := len(testSecret)
	for _, tc := range []struct {
		name string
		msgs []string
	}{
		{"one byte short", []string{"a:" + testSecret[:n-1], testSecret[n-1:] + ":b"}},
		{"three messages", []string{"a:" + testSecret[:4], testSecret[4 : n-2], testSecret[n-2:]}},
		{"tiny pieces", []string{testSecret[:3], testSecret[3:6], testSecret[6:9], testSecret[9:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			for _, m := range tc.msgs {
				body = append(body, grpcFrame(0, m)...)
			}
			g := readGuarded(body)
			if g.err != nil || len(g.out) != len(body) {
				t.Fatalf("err %v, %d of %d bytes", g.err, len(g.out), len(body))
			}
			var payloads []byte
			for rest := g.out; len(rest) >= 5; {
				l := int(rest[4]) | int(rest[3])<<8
				payloads = append(payloads, rest[5:5+l]...)
				rest = rest[5+l:]
			}
			if bytes.Contains(payloads, []byte(testSecret[:minEchoLen])) || bytes.Contains(payloads, []byte(testSecret[n-minEchoLen:])) {
				t.Fatalf("part of the secret went out: %q", payloads)
			}
		})
	}
	// A message that merely ends like a secret's first few bytes is
	// left alone.
	clean := grpcFrame(0, "id:"+testSecret[:minEchoLen-1])
	if g := readGuarded(clean); !bytes.Equal(g.out, clean) || g.hits != 0 {
		t.Fatalf("a short common prefix was masked: %q", g.out)
	}
}
