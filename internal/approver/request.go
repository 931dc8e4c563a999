package approver

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
)

// maxRequestBytes bounds the PEM request the approver parses; the API
// server does not bound spec.request beyond its request size limit, and
// a node's request is well under a kilobyte.
const maxRequestBytes = 64 << 10

// parseRequest decodes a CSR's spec.request: exactly one PEM block of
// type CERTIFICATE REQUEST and nothing else but white space, a DER
// certificate request, signed by the key it holds.
func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	if len(data) > maxRequestBytes {
		return nil, fmt.Errorf("the request is %d bytes, more than %d", len(data), maxRequestBytes)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("the request is not a PEM CERTIFICATE REQUEST")
	}
	if len(block.Headers) > 0 {
		return nil, errors.New("the request's PEM block has headers")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, errors.New("the request has more than one PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("checking the request's signature: %w", err)
	}
	return req, nil
}

// Object identifiers of the subject attributes a node certificate has.
var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// oneCNOneO reports whether subject has exactly one common name, one
// organization and no other attribute: what a signer copies into the
// certificate is then all the approver checked.
func oneCNOneO(subject pkix.Name) bool {
	var cn, o int
	for _, a := range subject.Names {
		switch {
		case a.Type.Equal(oidCommonName):
			cn++
		case a.Type.Equal(oidOrganization):
			o++
		default:
			return false
		}
	}
	return cn == 1 && o == 1
}
