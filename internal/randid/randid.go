package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes from crypto/rand as 2n lowercase hex digits:
// Hex(16) is a 128-bit id. crypto/rand.Read does not fail (it crashes the
// program rather than return short), so neither does Hex.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
