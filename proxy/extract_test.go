package proxy

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// The handle may be sent as Bearer, or Basic with the handle as the user
// name or as the password (clients that insist on a user name).
func TestExtractHandleForms(t *testing.T) {
	const h = "alh_0123456789abcdefghijABCDEFGHIJ0123456789abcdeFGHI"
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for name, pa := range map[string]string{
		"bearer":           "Bearer " + h,
		"basic user":       basic(h + ":"),
		"basic user, pass": basic(h + ":ignored"),
		"basic password":   basic("x:" + h),
		"basic no user":    basic(":" + h),
	} {
		r, _ := http.NewRequest("GET", "http://api.example.com/", nil)
		r.Header.Set("Proxy-Authorization", pa)
		if got, ok := extractHandle(r); !ok || got != h {
			t.Errorf("%s: %q %v", name, got, ok)
		}
	}
}
