package tokens

import (
	"strconv"
	"unicode/utf8"
)

// appendClaims writes the minted claims as JSON, in the same form
// json.Marshal gives wireOut, without reflection: minting is on the invoke
// path, and the encoder was a fifth of its cost beside the signature.
func appendClaims(b []byte, c *Claims) []byte {
	b = append(b, `{"iss":`...)
	b = appendString(b, c.Issuer)
	b = append(b, `,"aud":`...)
	b = appendString(b, c.Audience())
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, c.IssuedAt.Unix(), 10)
	b = append(b, `,"nbf":`...)
	b = strconv.AppendInt(b, c.NotBefore.Unix(), 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, c.ExpiresAt.Unix(), 10)
	b = append(b, `,"jti":`...)
	b = appendString(b, c.ID)
	b = append(b, `,"user_id":`...)
	b = appendString(b, c.UserID)
	b = append(b, `,"executa_tool_id":`...)
	b = appendString(b, c.ExecutaToolID)
	b = append(b, `,"tool_invoke_id":`...)
	b = appendString(b, c.ToolInvokeID)
	if c.MaxTokensPerCall != 0 {
		b = append(b, `,"maxTokensPerCall":`...)
		b = strconv.AppendInt(b, int64(c.MaxTokensPerCall), 10)
	}
	if c.MaxCallsPerInvoke != 0 {
		b = append(b, `,"maxCallsPerInvoke":`...)
		b = strconv.AppendInt(b, int64(c.MaxCallsPerInvoke), 10)
	}
	if len(c.Scopes) > 0 {
		b = append(b, `,"scopes":[`...)
		for i, s := range c.Scopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	if c.AppID != "" {
		b = append(b, `,"app_id":`...)
		b = appendString(b, c.AppID)
	}
	if c.AppSlug != "" {
		b = append(b, `,"app_slug":`...)
		b = appendString(b, c.AppSlug)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as json.Marshal).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
