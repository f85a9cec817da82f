package control

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// TokenFile is a principal's own bearer token (host.control_principals.tokens):
// who presents the token in File is Principal.
type TokenFile struct {
	Principal string
	File      string
}

// matchTokenFiles finds the token file whose token bearer is. Each file
// is read at each request, so a token is revoked by removing or
// rewriting its file; a file others may read (peerauth.LoadToken) counts
// as none, and the refusal names it.
func matchTokenFiles(files []TokenFile, bearer string) (host.Principal, bool, error) {
	var problems []error
	for i, f := range files {
		tok, err := peerauth.LoadToken(fmt.Sprintf("host.control_principals.tokens[%d] (%s)", i, f.Principal), f.File, peerauth.NoGroup)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if tok.Match(bearer) {
			return host.Principal{ID: f.Principal, Method: MethodToken}, true, nil
		}
	}
	return host.Principal{}, false, errors.Join(problems...)
}

// peerPrincipal names a unix socket's peer: its configured name, or
// "uid:<N>".
func peerPrincipal(p peerauth.Peer, names map[int]string) host.Principal {
	id, ok := names[p.UID]
	if !ok {
		id = "uid:" + strconv.Itoa(p.UID)
	}
	return host.Principal{ID: id, Method: MethodPeer, Attributes: map[string]string{"uid": strconv.Itoa(p.UID)}}
}

// CertIDFrom is how a client certificate names its principal
// (host.control_tls.id_from).
type CertIDFrom string

// Ways a client certificate names its principal.
const (
	// CertIDSPIFFE: the certificate's SPIFFE ID (its spiffe:// URI SAN)
	// as it is, else its subject as CertIDSubject does.
	CertIDSPIFFE CertIDFrom = "spiffe"
	// CertIDSubjectCN: "cn:<subject common name>".
	CertIDSubjectCN CertIDFrom = "subject_cn"
	// CertIDSubject: "dn:<subject distinguished name, RFC 2253>".
	CertIDSubject CertIDFrom = "subject"
)

// ErrBadCertID: a client certificate that names no principal the way
// host.control_tls.id_from asks (no common name, two SPIFFE IDs).
var ErrBadCertID = errors.New("the client certificate names no principal")

// certPrincipal names a verified client certificate's principal.
func certPrincipal(c *x509.Certificate, from CertIDFrom) (host.Principal, error) {
	attrs := map[string]string{"subject": c.Subject.String(), "subject_cn": c.Subject.CommonName}
	var spiffe []string
	for _, u := range c.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffe = append(spiffe, u.String())
		}
	}
	if len(spiffe) > 1 {
		// The SPIFFE X.509-SVID spec allows exactly one.
		return host.Principal{}, fmt.Errorf("%w: it carries more than one SPIFFE ID", ErrBadCertID)
	}
	if len(spiffe) == 1 {
		attrs["spiffe_id"] = spiffe[0]
	}
	p := host.Principal{Method: MethodMTLS, Attributes: attrs}
	switch from {
	case CertIDSPIFFE, "":
		if len(spiffe) == 1 {
			p.ID = spiffe[0]
			return p, nil
		}
		p.ID = "dn:" + c.Subject.String()
	case CertIDSubject:
		p.ID = "dn:" + c.Subject.String()
	case CertIDSubjectCN:
		if c.Subject.CommonName == "" {
			return host.Principal{}, fmt.Errorf("%w: its subject has no common name (host.control_tls.id_from: subject_cn)", ErrBadCertID)
		}
		p.ID = "cn:" + c.Subject.CommonName
	default:
		return host.Principal{}, fmt.Errorf("%w: host.control_tls.id_from is not spiffe, subject_cn or subject", ErrBadCertID)
	}
	if p.ID == "dn:" {
		return host.Principal{}, fmt.Errorf("%w: its subject is empty and it has no SPIFFE ID", ErrBadCertID)
	}
	return p, nil
}
