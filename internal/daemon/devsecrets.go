package daemon

import (
	"context"

	"github.com/airlock-dev/airlock/broker"
)

// demoSecretPath is where the dev run's generated demo secret lives.
const demoSecretPath = "demo/tickets"

// devSecrets is the file source of an airlock dev run: the demo secret
// from the run's own 0600 file, every other path from the user's
// broker.secrets.file (when set), so intents of the user's config keep
// working beside the demo ones.
type devSecrets struct {
	demo, user *broker.FileSource
}

var _ broker.SecretSource = devSecrets{}

// Read implements broker.SecretSource.
func (d devSecrets) Read(ctx context.Context, ref broker.SecretRef) (broker.SecretData, error) {
	if ref.Path == demoSecretPath || d.user == nil {
		return d.demo.Read(ctx, ref)
	}
	return d.user.Read(ctx, ref)
}
