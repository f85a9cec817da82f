package broker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/bits"
	"unsafe"
)

// HandlePrefix starts every handle, so scanners can find leaked ones.
const HandlePrefix = "alh_"

const (
	base62       = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	bodyLen      = 43 // 62^43 > 2^256
	checksumLen  = 6  // 62^6 > 2^32
	handleLen    = len(HandlePrefix) + bodyLen + checksumLen
	randomBytes  = 32
	fingerprintN = 8 // bytes of SHA-256 shown as a fingerprint
)

// HandleKey is the SHA-256 of a handle: what stores index by.
type HandleKey [sha256.Size]byte

// String is the key in hex (a store key, not a secret: the handle has 256
// bits of entropy, so its hash cannot be reversed).
func (k HandleKey) String() string { return hex.EncodeToString(k[:]) }

// Fingerprint is the short, loggable form of the key.
func (k HandleKey) Fingerprint() string { return hex.EncodeToString(k[:fingerprintN]) }

// newHandle returns a fresh random handle and its key. It allocates
// once: the handle.
func newHandle() (string, HandleKey, error) {
	var raw [randomBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", HandleKey{}, err
	}
	buf := make([]byte, handleLen)
	copy(buf, HandlePrefix)
	body := buf[len(HandlePrefix) : len(HandlePrefix)+bodyLen]
	encodeBase62(&raw, body)
	encodeUint32(crc32.ChecksumIEEE(body), buf[len(HandlePrefix)+bodyLen:])
	h := unsafe.String(&buf[0], len(buf)) // buf is not written again
	return h, keyOf(h), nil
}

// encodeBase62 writes raw, a big-endian 256-bit number, into out in base
// 62, most significant digit first and padded with '0': one long
// division by 62 per digit over four 64-bit limbs.
func encodeBase62(raw *[randomBytes]byte, out []byte) {
	var limbs [randomBytes / 8]uint64
	for i := range limbs {
		limbs[i] = binary.BigEndian.Uint64(raw[8*i:])
	}
	for i := len(out) - 1; i >= 0; i-- {
		var rem uint64
		for j := range limbs {
			limbs[j], rem = bits.Div64(rem, limbs[j], 62) // rem < 62: no overflow
		}
		out[i] = base62[rem]
	}
}

func encodeUint32(v uint32, out []byte) {
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = base62[v%62]
		v /= 62
	}
}

// ParseHandle checks a handle's form and checksum and returns its key. It
// makes no store lookup and does not allocate.
func ParseHandle(h string) (HandleKey, bool) {
	if len(h) != handleLen || h[:len(HandlePrefix)] != HandlePrefix {
		return HandleKey{}, false
	}
	body := h[len(HandlePrefix) : len(HandlePrefix)+bodyLen]
	for i := 0; i < len(h)-len(HandlePrefix); i++ {
		if !isBase62(h[len(HandlePrefix)+i]) {
			return HandleKey{}, false
		}
	}
	var sum [checksumLen]byte
	encodeUint32(crc32.ChecksumIEEE(bytesOf(body)), sum[:])
	if string(sum[:]) != h[len(HandlePrefix)+bodyLen:] {
		return HandleKey{}, false
	}
	return keyOf(h), true
}

// LooksLikeHandle reports whether s has a handle's form (for placeholder
// substitution and echo scanning); it does not check the checksum.
func LooksLikeHandle(s string) bool {
	return len(s) == handleLen && s[:len(HandlePrefix)] == HandlePrefix
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}

func keyOf(h string) HandleKey { return sha256.Sum256(bytesOf(h)) }

// bytesOf views s as bytes without copying; callers only read it. This
// keeps Resolve allocation-free.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Fingerprint returns the loggable fingerprint of a handle string.
func Fingerprint(h string) string { return keyOf(h).Fingerprint() }
