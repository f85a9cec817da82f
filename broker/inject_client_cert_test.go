package broker

import (
	"errors"
	"strings"
	"testing"
)

func TestClientCertInject(t *testing.T) {
	in := Intent{Secret: SecretRef{Field: "certificate"}}
	tests := []struct {
		name    string
		kind    ClientCertInject
		wantErr string
	}{
		{name: "defaults"},
		{name: "key is the certificate's field", kind: ClientCertInject{KeyField: "certificate"}, wantErr: "key_field"},
		{name: "chain is the key's field", kind: ClientCertInject{ChainField: "private_key"}, wantErr: "chain_field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.kind.WithDefaults().Validate("p", in)
			if tt.wantErr == "" && len(errs) > 0 || tt.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantErr)) {
				t.Fatalf("Validate: %v, want %q", errs, tt.wantErr)
			}
		})
	}
	k := (&ClientCertInject{}).WithDefaults()
	if _, err := k.CompleteSecret(Secret{Value: "cert", Fields: map[string]string{"certificate": "cert"}}); !errors.Is(err, ErrSecretFieldMissing) {
		t.Fatalf("a secret without its key: %v", err)
	}
	if _, err := k.CompleteSecret(Secret{Value: "cert", Fields: map[string]string{"private_key": "key"}}); err != nil {
		t.Fatal(err)
	}
}
