package pluginv1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/sdk/plugin"
)

// HandshakeLine is a provider's announcement, parsed and checked.
type HandshakeLine struct {
	AppVersion uint32
	Socket     string // absolute path of the provider's unix socket
}

// LineError says which field of the handshake line is wrong. It never
// holds the field's value: the line comes from a process the host does
// not trust.
type LineError struct {
	Field  string // "line", "core-protocol-version", "app-protocol-version", "network-type", "network-addr", "protocol"
	Reason string
}

func (e *LineError) Error() string { return "handshake line: " + e.Field + ": " + e.Reason }

// ErrLineTooLong: no newline within plugin.MaxHandshakeLine bytes.
var ErrLineTooLong = &LineError{Field: "line", Reason: fmt.Sprintf("longer than %d bytes", plugin.MaxHandshakeLine)}

// ReadHandshakeLine reads at most plugin.MaxHandshakeLine bytes up to the
// first newline and parses them.
func ReadHandshakeLine(r io.Reader) (HandshakeLine, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, plugin.MaxHandshakeLine+1), plugin.MaxHandshakeLine+1)
	line, err := br.ReadString('\n')
	if err != nil {
		if len(line) > plugin.MaxHandshakeLine {
			return HandshakeLine{}, ErrLineTooLong
		}
		if errors.Is(err, io.EOF) {
			return HandshakeLine{}, &LineError{Field: "line", Reason: "the provider exited or closed stdout before a complete line"}
		}
		return HandshakeLine{}, err
	}
	if len(line) > plugin.MaxHandshakeLine {
		return HandshakeLine{}, ErrLineTooLong
	}
	return ParseHandshakeLine(strings.TrimSuffix(line, "\n"))
}

// ParseHandshakeLine checks every rule of plugin/v1: exactly five fields
// (a sixth, the go-plugin TLS certificate, is refused even empty); core
// version 1; app version >= 1; network unix; protocol grpc; an absolute
// socket path of at most 103 bytes, without ".", ".." or empty segments,
// with printable characters only.
func ParseHandshakeLine(line string) (HandshakeLine, error) {
	if len(line) > plugin.MaxHandshakeLine {
		return HandshakeLine{}, ErrLineTooLong
	}
	f := strings.Split(line, "|")
	if len(f) != 5 {
		return HandshakeLine{}, &LineError{Field: "line", Reason: fmt.Sprintf("has %d fields, want exactly 5", len(f))}
	}
	if f[0] != strconv.Itoa(plugin.CoreProtocolVersion) {
		return HandshakeLine{}, &LineError{Field: "core-protocol-version", Reason: "must be 1"}
	}
	app, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil || app < 1 || f[1] != strconv.FormatUint(app, 10) {
		return HandshakeLine{}, &LineError{Field: "app-protocol-version", Reason: "must be an integer of at least 1"}
	}
	if f[2] != "unix" {
		return HandshakeLine{}, &LineError{Field: "network-type", Reason: "must be unix"}
	}
	if err := checkSocketPath(f[3]); err != nil {
		return HandshakeLine{}, err
	}
	if f[4] != "grpc" {
		return HandshakeLine{}, &LineError{Field: "protocol", Reason: "must be grpc"}
	}
	return HandshakeLine{AppVersion: uint32(app), Socket: f[3]}, nil
}

func checkSocketPath(p string) error {
	bad := func(reason string) error { return &LineError{Field: "network-addr", Reason: reason} }
	switch {
	case p == "" || p[0] != '/':
		return bad("must be an absolute path")
	case len(p) > plugin.MaxSocketPath:
		return bad(fmt.Sprintf("must be at most %d bytes", plugin.MaxSocketPath))
	case !utf8.ValidString(p):
		return bad("must be valid UTF-8")
	}
	for _, r := range p {
		if !unicode.IsPrint(r) {
			return bad("must hold printable characters only")
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("must not have empty segments")
		case ".", "..":
			return bad("must not have . or .. segments")
		}
	}
	return nil
}
