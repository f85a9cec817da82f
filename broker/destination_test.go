package broker

import "testing"

// Destinations are names: an IP literal in any spelling, or a wildcard
// that can only match such literals, is refused at config and at Issue.
func TestDestinationRefusesIPLiterals(t *testing.T) {
	for _, h := range []string{"127.0.0.1", "127.1", "127.000.000.001", "0x7f.1", "0x7f000001.x.0x1", "*.0.0.1", "2130706433",
		"10.0.0.1", "[::1]", "::ffff:127.0.0.1", "*.1", "a.b.0x"} {
		if _, err := (Destination{Host: h}).Normalize(); err == nil {
			t.Errorf("%q accepted", h)
		}
	}
	for _, h := range []string{"api.example.com", "*.example.com", "1.example.com", "x.0x7f.io", "s3.eu-1.amazonaws.com"} {
		if _, err := (Destination{Host: h}).Normalize(); err != nil {
			t.Errorf("%q refused: %v", h, err)
		}
	}
}
