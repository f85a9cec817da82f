package proxy

import (
	"bytes"
	"testing"
)

// The message guard masks only whole forms (one split across messages
// has its later part masked). It must never mask a message for ending
// with a secret's start alone: against an upstream that echoes what the
// plugin sends, that would tell the plugin whether its guess is a
// prefix, and so the secret byte by byte.
func TestMessageGuardNoPrefixOracle(t *testing.T) {
	for n := 1; n < len(testSecret); n++ {
		body := grpcFrame(0, "guess:"+testSecret[:n])
		if g := readGuarded(body); !bytes.Equal(g.out, body) || g.hits != 0 {
			t.Fatalf("a message ending with the secret's first %d bytes was changed: %q", n, g.out)
		}
	}
}
