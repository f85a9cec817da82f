package executa

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxFrame bounds one line of the protocol.
const MaxFrame = 2 << 20

// Standard JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Frame errors: protocol errors, reported and survived.
var (
	ErrFrameTooLarge = errors.New("frame larger than 2 MiB")
	ErrNotJSON       = errors.New("frame is not a JSON object")
	ErrNotJSONRPC    = errors.New("frame is not JSON-RPC 2.0")
)

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Message is one frame: a request, a notification (no id), or a response
// (no method).
type Message struct {
	JSONRPC       string          `json:"jsonrpc"`
	ID            json.RawMessage `json:"id,omitempty"`
	Method        string          `json:"method,omitempty"`
	Params        json.RawMessage `json:"params,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         *RPCError       `json:"error,omitempty"`
	FileTransport string          `json:"__file_transport,omitempty"`
}

// IsResponse reports a frame that answers one of ours.
func (m *Message) IsResponse() bool { return m.Method == "" }

// FrameReader reads frames from a plugin's stdout.
type FrameReader struct {
	br *bufio.Reader
}

// NewFrameReader wraps r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next frame. A bad frame returns a frame error and the
// reader stays usable: the next call reads the next line. io.EOF means
// stdout closed.
func (fr *FrameReader) Next() (*Message, error) {
	line, err := fr.readLine()
	if err != nil {
		return nil, err
	}
	return ParseFrame(line)
}

// readLine reads one line, discarding (not buffering) an oversized one.
func (fr *FrameReader) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := fr.br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxFrame+1 {
			// Drop the rest of this line without keeping it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = fr.br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, ErrFrameTooLarge
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(buf, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return bytes.TrimRight(buf, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

// ParseFrame validates one line.
func ParseFrame(line []byte) (*Message, error) {
	if len(line) > MaxFrame {
		return nil, ErrFrameTooLarge
	}
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return nil, ErrNotJSON
	}
	m := &Message{}
	if err := json.Unmarshal(t, m); err != nil {
		return nil, ErrNotJSON
	}
	if m.JSONRPC != "2.0" {
		return nil, ErrNotJSONRPC
	}
	if m.Method == "" && len(m.ID) == 0 {
		return nil, fmt.Errorf("%w: a response without an id", ErrNotJSONRPC)
	}
	return m, nil
}

// Encode writes one frame.
func Encode(w io.Writer, m *Message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > MaxFrame {
		return ErrFrameTooLarge
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
