package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// Rotating the intercept CA takes two steps, because a plugin reads the
// CA bundle once, when it starts:
//
//   - stage: a new CA is created and added to the bundle; the old one
//     still signs. Plugins (re)started from now on trust both.
//   - promote: once every plugin has restarted, the new CA signs; the old
//     one stays in the bundle (plugins still trusting only the new one
//     or both keep working) until the next stage drops it.
//
// Every replica rereads the CA every proxy.intercept.reload.

// CA actions for InterceptCA.
const (
	CAStatusAction  = "status"
	CAStageAction   = "stage"
	CAPromoteAction = "promote"
)

// CACert describes one CA certificate.
type CACert struct {
	Subject  string    `json:"subject"`
	SHA256   string    `json:"sha256"`
	NotAfter time.Time `json:"not_after"`
}

// CAStatus describes the intercept CA.
type CAStatus struct {
	Store   string   `json:"store"`
	Signer  CACert   `json:"signer"`
	Next    *CACert  `json:"next,omitempty"` // staged, trusted, not yet signing
	Trusted []CACert `json:"trusted"`        // the bundle plugins get
}

// ErrNothingStaged: promote without a staged CA.
var ErrNothingStaged = errors.New("no next CA is staged: run stage first")

// ErrAlreadyStaged: stage while a staged CA waits for promote.
var ErrAlreadyStaged = errors.New("a next CA is already staged: promote it first")

// InterceptCA runs action (status, stage or promote) on the intercept CA
// cfg names, creating the CA first when none exists; vc is needed when
// the CA lives in Vault.
func InterceptCA(ctx context.Context, cfg InterceptConfig, vc *vaultapi.Client, action string) (CAStatus, error) {
	if cfg.CAFile == "" {
		return CAStatus{}, errors.New("proxy.intercept is not configured")
	}
	store, err := newCAStore(cfg, vc)
	if err != nil {
		return CAStatus{}, err
	}
	for {
		ca, err := openCA(ctx, store, cfg.PermittedDomains)
		if err != nil {
			return CAStatus{}, err
		}
		st := ca.state
		switch action {
		case CAStatusAction:
			return ca.status(store), nil
		case CAStageAction:
			if ca.next != nil {
				return CAStatus{}, ErrAlreadyStaged
			}
			cert, key, err := newCA(cfg.PermittedDomains)
			if err != nil {
				return CAStatus{}, err
			}
			st.Bundle = append(pemOf(ca.cert.Raw), cert...)
			st.NextKey = key
		case CAPromoteAction:
			if ca.next == nil {
				return CAStatus{}, ErrNothingStaged
			}
			st.Bundle = append(pemOf(ca.next.Raw), pemOf(ca.cert.Raw)...)
			st.Key, st.NextKey = st.NextKey, nil
		default:
			return CAStatus{}, fmt.Errorf("unknown CA action %q: status, stage or promote", action)
		}
		err = store.save(ctx, st)
		if errors.Is(err, errCAConflict) {
			continue // another replica or operator wrote meanwhile: start over from what it wrote
		}
		if err != nil {
			return CAStatus{}, err
		}
		ca, err = openCA(ctx, store, cfg.PermittedDomains)
		if err != nil {
			return CAStatus{}, err
		}
		return ca.status(store), nil
	}
}

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }

func (ca *interceptCA) status(store caStore) CAStatus {
	st := CAStatus{Store: store.String(), Signer: describeCert(ca.cert.Raw, ca.cert.Subject.CommonName, ca.cert.NotAfter)}
	if ca.next != nil {
		n := describeCert(ca.next.Raw, ca.next.Subject.CommonName, ca.next.NotAfter)
		st.Next = &n
	}
	certs, _ := parseCerts(ca.state.Bundle)
	for _, c := range certs {
		st.Trusted = append(st.Trusted, describeCert(c.Raw, c.Subject.CommonName, c.NotAfter))
	}
	return st
}

func describeCert(der []byte, subject string, notAfter time.Time) CACert {
	sum := sha256.Sum256(der)
	return CACert{Subject: subject, SHA256: hex.EncodeToString(sum[:]), NotAfter: notAfter.UTC()}
}
