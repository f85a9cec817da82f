package tokens

import (
	"strconv"

	"github.com/airlock-dev/airlock/internal/jsonenc"
)

// appendClaims writes the minted claims as JSON, in the same form
// json.Marshal gives wireOut, without reflection: minting is on the invoke
// path, and the encoder was a fifth of its cost beside the signature.
func appendClaims(b []byte, c *Claims) []byte {
	b = append(b, `{"iss":`...)
	b = jsonenc.AppendString(b, c.Issuer)
	b = append(b, `,"aud":`...)
	b = jsonenc.AppendString(b, c.Audience())
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, c.IssuedAt.Unix(), 10)
	b = append(b, `,"nbf":`...)
	b = strconv.AppendInt(b, c.NotBefore.Unix(), 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, c.ExpiresAt.Unix(), 10)
	b = append(b, `,"jti":`...)
	b = jsonenc.AppendString(b, c.ID)
	b = append(b, `,"user_id":`...)
	b = jsonenc.AppendString(b, c.UserID)
	b = append(b, `,"executa_tool_id":`...)
	b = jsonenc.AppendString(b, c.ExecutaToolID)
	b = append(b, `,"tool_invoke_id":`...)
	b = jsonenc.AppendString(b, c.ToolInvokeID)
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
			b = jsonenc.AppendString(b, s)
		}
		b = append(b, ']')
	}
	if c.AppID != "" {
		b = append(b, `,"app_id":`...)
		b = jsonenc.AppendString(b, c.AppID)
	}
	if c.AppSlug != "" {
		b = append(b, `,"app_slug":`...)
		b = jsonenc.AppendString(b, c.AppSlug)
	}
	return append(b, '}')
}
