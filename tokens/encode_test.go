package tokens

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// appendClaims must produce what json.Marshal would, for any strings.
func FuzzAppendClaims(f *testing.F) {
	f.Add("u-1", "tool", "inv", "app", "slug")
	f.Add("quote\"back\\slash", "\x00\x1f\x7f", "\u2028<>&", "\xff\xfe", "é日本")
	f.Fuzz(func(t *testing.T, user, tool, invoke, app, slug string) {
		now := time.Unix(1796023433, 0)
		c := &Claims{
			RegisteredClaims: jwt.RegisteredClaims{Issuer: "airlock", Audience: jwt.ClaimStrings{AudienceStorage},
				IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)), ID: "j"},
			Binding: Binding{UserID: user, ExecutaToolID: tool, ToolInvokeID: invoke},
			Scopes:  []string{"user", "tool"}, AppID: app, AppSlug: slug, MaxTokensPerCall: 3,
		}
		got := appendClaims(nil, c)
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("invalid JSON %q: %v", got, err)
		}
		want := map[string]any{}
		ref, _ := json.Marshal(struct {
			Binding
			App  string `json:"app_id,omitempty"`
			Slug string `json:"app_slug,omitempty"`
		}{c.Binding, app, slug})
		_ = json.Unmarshal(ref, &want)
		for k, v := range want {
			if back[k] != v {
				t.Fatalf("%s = %q, want %q", k, back[k], v)
			}
		}
	})
}
