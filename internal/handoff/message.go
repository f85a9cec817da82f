package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/peerauth"
)

// Version is the hand-over protocol this package speaks: 2 names the
// plugin beside the token (1 sent the bare token, and answered "ok" or a
// reason with no prefix).
const Version = 2

// replyPrefix starts every answer of a Version serve.
const replyPrefix = "airlock-handoff/2"

const (
	maxMessage = 4 << 10
	// maxPlugin bounds a plugin's name (the broker's bound on ids).
	maxPlugin = 256
)

// ErrVersion: airlock host and airlock serve speak different versions of
// the protocol (they are of different releases).
var ErrVersion = errors.New("airlock host and airlock serve speak different proxy hand-over versions")

// message is what the host sends, as one JSON object.
type message struct {
	Version int    `json:"version"`
	Token   string `json:"token"`
	Plugin  string `json:"plugin"`
}

// encodeMessage is m on the wire.
func encodeMessage(m message) ([]byte, error) {
	if !validPlugin(m.Plugin) {
		return nil, errors.New("proxy handoff: the plugin's name is empty, longer than 256 bytes or holds control characters")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > maxMessage {
		return nil, errors.New("proxy handoff: the message is longer than airlock serve reads")
	}
	return b, nil
}

// The codes of a reply: its first word after the prefix.
const (
	codeOK              = "ok"
	codeVersion         = "version"         // the host speaks another version
	codeUnauthenticated = "unauthenticated" // not broker.api.token_file's token
	codeMalformed       = "malformed"       // not a version-2 message
	codeDescriptor      = "descriptor"      // not one listening socket
	codeNameTaken       = "name_taken"      // another host's plugin of that name is served
)

// reply is serve's answer: a code and, for a refusal, why. It never
// quotes what the host sent.
type reply struct {
	code   string
	detail string
}

// line is r on the wire: "airlock-handoff/2 <code>[: <detail>]\n".
func (r *reply) line() string {
	if r.detail == "" {
		return replyPrefix + " " + r.code + "\n"
	}
	return replyPrefix + " " + r.code + ": " + r.detail + "\n"
}

// readMessage reads a host's message: its version first, then the token,
// then the plugin's name. r is the refusal, nil when the message is good.
func readMessage(b []byte, token *peerauth.Token) (m message, r *reply) {
	if len(b) == 0 || b[0] != '{' {
		// Version 1 sent the token alone.
		return m, &reply{code: codeVersion, detail: "this airlock serve speaks proxy hand-over version " + strconv.Itoa(Version) +
			", which names the plugin; the airlock host sent version 1: run airlock host of the release of airlock serve"}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, &reply{code: codeMalformed, detail: "not the JSON object of proxy hand-over version " + strconv.Itoa(Version)}
	}
	if m.Version != Version {
		return m, &reply{code: codeVersion, detail: fmt.Sprintf("this airlock serve speaks proxy hand-over version %d; "+
			"the airlock host sent version %d: run airlock host and airlock serve of the same release", Version, m.Version)}
	}
	if !token.Match(m.Token) {
		return m, &reply{code: codeUnauthenticated, detail: "present the token of broker.api.token_file"}
	}
	if !validPlugin(m.Plugin) {
		return m, &reply{code: codeMalformed, detail: "the plugin field must name the plugin: 1 to 256 bytes of UTF-8 without control characters"}
	}
	return m, nil
}

// parseReply reads serve's answer line: nil for ok, else an error
// wrapping ErrRefused, and ErrVersion when the versions differ.
func parseReply(line string) error {
	line = strings.TrimRight(line, "\r\n")
	rest, ok := strings.CutPrefix(line, replyPrefix+" ")
	if !ok {
		// A version-1 serve answers without the prefix ("ok", or why
		// not: it took the whole message for a wrong token).
		return fmt.Errorf("%w: %w: this airlock host speaks proxy hand-over version %d, which names the plugin, "+
			"and airlock serve answered as version 1 does: run airlock serve of the release of airlock host", ErrRefused, ErrVersion, Version)
	}
	code, detail, _ := strings.Cut(rest, ": ")
	switch code {
	case codeOK:
		return nil
	case codeVersion:
		return fmt.Errorf("%w: %w: %s", ErrRefused, ErrVersion, detail)
	}
	return fmt.Errorf("%w: %s: %s", ErrRefused, code, detail)
}

// validPlugin reports whether p can be a plugin's name.
func validPlugin(p string) bool {
	if p == "" || len(p) > maxPlugin || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
