package mcp

import "io"

// atEnd is a request body that calls fn once, when its last byte has
// been read: at EOF, or at its declared length (a decoder that stops at
// the end of its value need not read the EOF).
type atEnd struct {
	io.ReadCloser
	length int64 // -1: unknown
	n      int64
	fn     func()
}

func (b *atEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.fn == nil {
		return n, err
	}
	b.n += int64(n)
	if err == io.EOF || err == nil && b.length >= 0 && b.n >= b.length {
		b.fn()
		b.fn = nil
	}
	return n, err
}
