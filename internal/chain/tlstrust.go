package chain

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/detour-proxy/detour/policy"
)

// explainTLS adds to the verdict of an attempt refused at the TLS handshake
// what went wrong and what to change. "unreachable tls" alone sends the
// operator hunting: the usual cause is a private gateway or a test fake
// whose certificate detour does not trust, and the fix is the upstream's
// ca_file, which the reason names together with the roots that were tried.
// The account is detour's own words, a host and a file path: nothing the
// upstream sent, so it stays safe to log and to show the app.
func explainTLS(u *policy.Upstream, err error, v policy.Verdict) policy.Verdict {
	host := ""
	if u.BaseURL != nil {
		host = u.BaseURL.Host
	}
	field := "upstreams." + u.Name + ".ca_file"
	var (
		certErr   *tls.CertificateVerificationError
		unknown   x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		headerErr tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		if u.CAFile == "" {
			v.Reason += fmt.Sprintf(": the certificate of %s is signed by an authority the system roots do not know; set %s to a PEM file of the CA that signed it", host, field)
		} else {
			v.Reason += fmt.Sprintf(": the certificate of %s is signed by an authority neither the system roots nor ca_file %s hold; fix %s: it must be a PEM file of the CA that signed the certificate", host, u.CAFile, field)
		}
	case errors.As(err, &hostErr):
		v.Reason += fmt.Sprintf(": the certificate of %s is not valid for that name (%v); use the name it was issued for in upstreams.%s.base_url", host, hostErr.Error(), u.Name)
	case errors.As(err, &invalid):
		v.Reason += fmt.Sprintf(": the certificate of %s is not valid (%v)", host, invalid.Error())
	case errors.As(err, &certErr):
		v.Reason += fmt.Sprintf(": the certificate of %s failed verification against %s (%v)", host, rootsName(u), certErr.Err)
	case errors.As(err, &headerErr):
		v.Reason += fmt.Sprintf(": %s did not answer in TLS; if it serves plain HTTP, make upstreams.%s.base_url start with http://", host, u.Name)
	}
	return v
}

// rootsName names the roots an upstream's certificate is verified against.
func rootsName(u *policy.Upstream) string {
	if u.CAFile == "" {
		return "the system roots"
	}
	return "the system roots and ca_file " + u.CAFile
}
