package broker

import "fmt"

// The client_cert kind presents a client certificate on the upstream TLS
// connection (mutual TLS); nothing is added to the request.

func init() {
	RegisterInjectKind("client_cert", func() InjectKind { return new(ClientCertInject) })
}

var _ InjectKind = (*ClientCertInject)(nil)

// defaultClientKeyField is the field of a Vault PKI issue answer that
// holds the private key.
const defaultClientKeyField = "private_key"

// ClientCertInject presents the bound field (a PEM certificate) with the
// private key in KeyField of the same secret, and the intermediate
// certificates in ChainField when set. Bound to a leased PKI issue
// (source vault_lease, a role with generate_lease), each invocation has
// its own certificate, revoked with its lease; the private key never
// leaves the proxy.
type ClientCertInject struct {
	KeyField   string `yaml:"key_field"`
	ChainField string `yaml:"chain_field"`
}

// Kind implements InjectKind.
func (*ClientCertInject) Kind() string { return "client_cert" }

// WithDefaults implements InjectKind.
func (c *ClientCertInject) WithDefaults() InjectKind {
	d := *c
	if d.KeyField == "" {
		d.KeyField = defaultClientKeyField
	}
	return &d
}

// Validate implements InjectKind.
func (c *ClientCertInject) Validate(p string, in Intent) []error {
	var errs []error
	if c.KeyField == "" || c.KeyField == in.Secret.Field {
		errs = append(errs, fmt.Errorf("%s.key_field: the field holding the private key, not the certificate's", p))
	}
	if c.ChainField != "" && (c.ChainField == in.Secret.Field || c.ChainField == c.KeyField) {
		errs = append(errs, fmt.Errorf("%s.chain_field: a field of its own", p))
	}
	return errs
}

// CompleteSecret implements InjectKind: the key must be there.
func (c *ClientCertInject) CompleteSecret(s Secret) (Secret, error) {
	if s.Fields[c.KeyField] == "" {
		return Secret{}, fmt.Errorf("%w (field %q)", ErrSecretFieldMissing, c.KeyField)
	}
	return s, nil
}
