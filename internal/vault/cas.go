package vault

import (
	"errors"
	"net/http"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
)

// IsCASConflict reports whether a KV v2 write was refused because its
// check-and-set version is no longer current: someone else wrote first.
func IsCASConflict(err error) bool {
	var re *vaultapi.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusBadRequest &&
		strings.Contains(strings.Join(re.Errors, " "), "check-and-set")
}
