package h1

import "testing"

// recordEnds is where each whole TLS record of stream ends (a 5-byte
// header whose last two bytes are the body's length), and whether the
// stream ends inside a record: the record framing read all at once.
func recordEnds(stream []byte) (ends []int, mid bool) {
	i := 0
	for i < len(stream) {
		if len(stream)-i < 5 {
			return ends, true
		}
		end := i + 5 + (int(stream[i+3])<<8 | int(stream[i+4]))
		if end > len(stream) {
			return ends, true
		}
		ends = append(ends, end)
		i = end
	}
	return ends, false
}

// Guard's socket follows the record framing of whatever it passes on,
// however the stream is cut into reads: after any prefix, it is inside a
// record exactly when the framing read all at once says the prefix ends
// inside one.
func FuzzGuardFollow(f *testing.F) {
	f.Add([]byte("\x17\x03\x03\x00\x02hi\x17\x03\x03\x00\x00"), []byte{1, 4, 2})
	f.Add([]byte("\x16\x03\x03\x00\x04abcd\x17\x03"), []byte{0, 7})
	f.Add([]byte("\x15\x03\x03\xff\xff"), []byte{3})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		g := &guardedConn{}
		at := 0
		for _, c := range cuts {
			if at >= len(stream) {
				break
			}
			n := min(int(c), len(stream)-at)
			g.follow(stream[at : at+n])
			at += n
			if _, mid := recordEnds(stream[:at]); g.midRecord() != mid {
				t.Fatalf("after %d of %d bytes: inside a record %v, want %v", at, len(stream), g.midRecord(), mid)
			}
		}
		g.follow(stream[at:])
		if _, mid := recordEnds(stream); g.midRecord() != mid {
			t.Fatalf("after the whole stream: inside a record %v, want %v", g.midRecord(), mid)
		}
	})
}
