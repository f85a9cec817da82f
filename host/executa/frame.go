package executa

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/internal/strictjson"
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
	// ErrDuplicateKey: a frame repeats an object key, or holds two that
	// differ only in case, anywhere in it. A response or request that
	// does is answered as refused (see ParseFrame); a notification is
	// dropped.
	ErrDuplicateKey = errors.New("frame has a duplicate or case-variant key")
)

// duplicateKeyRefused stands in for a response that repeated a key.
var duplicateKeyRefused = &RPCError{Code: CodeInvalidRequest, Message: ErrDuplicateKey.Error()}

// frameTooLargeRefused answers a call whose response frame was over
// MaxFrame: the call ends at once instead of waiting out its deadline.
var frameTooLargeRefused = &RPCError{Code: CodeInvalidRequest, Message: ErrResponseTooLarge.Error()}

// FrameTooLargeError is ErrFrameTooLarge with the id the oversized frame
// named before its size ran out, when it named one early (responses put
// "id" before "result"): enough to end the call it answered.
type FrameTooLargeError struct {
	ID json.RawMessage // nil when not found in the frame's first bytes
}

func (e *FrameTooLargeError) Error() string { return ErrFrameTooLarge.Error() }

func (e *FrameTooLargeError) Unwrap() error { return ErrFrameTooLarge }

// leadingID finds a top-level "id" member among the first members of a
// truncated JSON object, before any member it cannot read whole.
func leadingID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for range 8 { // "jsonrpc", "id", maybe a few more: never the payload
		k, err := dec.Token()
		key, ok := k.(string)
		if err != nil || !ok {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return v
		}
	}
	return nil
}

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

	// duplicateKey marks a request whose frame repeated a key; its params
	// were dropped.
	duplicateKey bool
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
			// Keep the id the frame names early, drop the rest of this
			// line without keeping it.
			head := buf[:min(len(buf), 4<<10)]
			head = append(head[:len(head):len(head)], chunk[:min(len(chunk), 4<<10-len(head))]...)
			id := leadingID(head)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = fr.br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, &FrameTooLargeError{ID: id}
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
	// A payload (result, params, a storage value) that repeats a key means
	// different things to different readers: never acted on. A response
	// becomes a refusal its caller sees (Invoke: ErrDuplicateKey); a
	// request keeps only its id and method, for reverse to refuse.
	if err := strictjson.Check(t); err != nil {
		switch {
		case len(m.ID) == 0:
			return nil, fmt.Errorf("%w: %w", ErrNotJSON, ErrDuplicateKey)
		case m.IsResponse():
			return &Message{JSONRPC: "2.0", ID: m.ID, Error: duplicateKeyRefused}, nil
		default:
			return &Message{JSONRPC: "2.0", ID: m.ID, Method: m.Method, duplicateKey: true}, nil
		}
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
