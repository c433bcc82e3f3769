package mitm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

const (
	// caCommonName is the start of the CA's subject CN; Generate appends a
	// random suffix so two installs are told apart in trust-store listings.
	caCommonName = "detour local CA"

	// caValidityYears is how long a generated CA lasts. The CA lives in a
	// file or a Kubernetes Secret and is baked into app trust bundles;
	// rotating it means redistributing it, so it is long-lived while the
	// leaves it signs are short-lived (LeafValidity).
	caValidityYears = 10

	// clockSkew backdates NotBefore on every certificate so a client whose
	// clock is a little behind detour's still accepts it.
	clockSkew = time.Hour

	// caExpiryWarning is how close to expiry a loaded CA triggers a warning.
	caExpiryWarning = 30 * 24 * time.Hour

	// minRSABits is the smallest RSA CA key LoadOrCreate accepts.
	minRSABits = 2048
)

// CA is detour's certificate authority: the certificate apps trust and the
// key that signs leaf certificates for intercepted hosts.
type CA struct {
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate
	// Key is the CA private key (*ecdsa.PrivateKey or *rsa.PrivateKey).
	Key crypto.Signer
	// CertPEM is Cert encoded as a single PEM CERTIFICATE block, ready to be
	// written into a trust bundle.
	CertPEM []byte
}

// Generate makes a new CA in memory with an ECDSA P-256 key and a random
// 128-bit serial, both from crypto/rand. The CA may sign leaves only (path
// length zero) and has no name constraints, because the set of intercepted
// hosts comes from policy and may change on reload without re-issuing the CA.
func Generate() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("mitm: generating CA name: %w", err)
	}
	notBefore := time.Now().UTC().Add(-clockSkew)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   caCommonName + " " + hex.EncodeToString(suffix[:]),
			Organization: []string{"detour"},
		},
		NotBefore:             notBefore,
		NotAfter:              notBefore.AddDate(caValidityYears, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		// SubjectKeyId is filled in by x509.CreateCertificate for CAs, and
		// copied into each leaf's AuthorityKeyId.
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("mitm: creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parsing new CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM(cert)}, nil
}

// randomSerial returns a positive random serial of up to 128 bits. RFC 5280
// allows 20 octets; 128 bits of crypto/rand makes collisions and guessing
// irrelevant.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("mitm: generating serial: %w", err)
		}
		if n.Sign() > 0 { // a zero serial is not allowed
			return n, nil
		}
	}
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// LoadOrCreate loads the CA from certFile and keyFile, or, when both are
// missing, generates one and writes it there (created is then true).
//
// When only one of the two files exists it returns an error rather than
// generating: a new CA would silently invalidate every bundle apps were given,
// and a lost key usually means a mount or path mistake.
//
// A key file that group or others may access is still loaded, with a warning
// in warnings for the caller to log: Kubernetes Secret volumes default to mode
// 0644, and refusing to start there would be worse than saying so.
func LoadOrCreate(certFile, keyFile string) (ca *CA, created bool, warnings []string, err error) {
	certExists, err := fileExists(certFile, "CA certificate")
	if err != nil {
		return nil, false, nil, err
	}
	keyExists, err := fileExists(keyFile, "CA key")
	if err != nil {
		return nil, false, nil, err
	}
	switch {
	case !certExists && !keyExists:
		ca, err := Generate()
		if err != nil {
			return nil, false, nil, err
		}
		if err := writeCA(ca, certFile, keyFile); err != nil {
			return nil, false, nil, err
		}
		return ca, true, nil, nil
	case !keyExists:
		return nil, false, nil, fmt.Errorf("mitm: CA key file %s is missing but CA certificate %s exists: "+
			"restore the key, or remove the certificate to generate a new CA (apps must then be given the new CA)",
			keyFile, certFile)
	case !certExists:
		return nil, false, nil, fmt.Errorf("mitm: CA certificate file %s is missing but CA key %s exists: "+
			"restore the certificate, or remove the key to generate a new CA (apps must then be given the new CA)",
			certFile, keyFile)
	}
	return load(certFile, keyFile, time.Now())
}

// fileExists reports whether path exists. Stat, not Lstat: Kubernetes mounts
// Secret keys as symlinks into a ..data directory.
func fileExists(path, what string) (bool, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("mitm: %s file %s: %w", what, path, err)
	case fi.IsDir():
		return false, fmt.Errorf("mitm: %s file %s is a directory", what, path)
	}
	return true, nil
}

func load(certFile, keyFile string, now time.Time) (*CA, bool, []string, error) {
	var warnings []string

	certData, err := os.ReadFile(certFile)
	if err != nil {
		return nil, false, nil, fmt.Errorf("mitm: reading CA certificate: %w", err)
	}
	cert, err := parseCACert(certData, now)
	if err != nil {
		return nil, false, nil, fmt.Errorf("mitm: CA certificate %s: %w", certFile, err)
	}
	if left := cert.NotAfter.Sub(now); left < caExpiryWarning {
		warnings = append(warnings, fmt.Sprintf("CA certificate %s expires in %d days (%s): "+
			"generate a new CA and redistribute it before then", certFile, int(left.Hours()/24),
			cert.NotAfter.UTC().Format(time.DateOnly)))
	}

	fi, err := os.Stat(keyFile)
	if err != nil {
		return nil, false, nil, fmt.Errorf("mitm: CA key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		warnings = append(warnings, fmt.Sprintf("CA key file %s has mode %04o and is accessible to group or others: "+
			"chmod 0600 it. In Kubernetes, where a Secret file is owned by root and detour runs as another user, "+
			"it must be readable by detour: mount the Secret into detour's container only (the chart does), "+
			"with defaultMode 0440 and the pod's fsGroup, or 0444", keyFile, perm))
	}
	keyData, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, false, nil, fmt.Errorf("mitm: reading CA key: %w", err)
	}
	key, err := parsePrivateKey(keyData)
	if err != nil {
		return nil, false, nil, fmt.Errorf("mitm: CA key %s: %w", keyFile, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, false, nil, fmt.Errorf("mitm: CA key %s does not match CA certificate %s: "+
			"restore the matching pair, or remove both to generate a new CA", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM(cert)}, false, warnings, nil
}

// parseCACert parses the first CERTIFICATE block of data and checks it can act
// as detour's CA at time now.
func parseCACert(data []byte, now time.Time) (*x509.Certificate, error) {
	var block *pem.Block
	for rest := data; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block found")
		}
		if block.Type == "CERTIFICATE" {
			break
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("certificate %q is not a CA (basic constraints CA:TRUE missing)", cert.Subject.CommonName)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certificate %q may not sign certificates (key usage keyCertSign missing)", cert.Subject.CommonName)
	}
	if !now.Before(cert.NotAfter) {
		return nil, fmt.Errorf("certificate %q expired on %s: generate a new CA and redistribute it",
			cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("certificate %q is not valid until %s: check the system clock",
			cert.Subject.CommonName, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	switch pub := cert.PublicKey.(type) {
	case *ecdsa.PublicKey:
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits is too small (minimum %d)", pub.N.BitLen(), minRSABits)
		}
	default:
		return nil, fmt.Errorf("unsupported public key type %T (want ECDSA or RSA)", cert.PublicKey)
	}
	return cert, nil
}

// parsePrivateKey accepts the PEM forms openssl and Go tools write: SEC 1
// "EC PRIVATE KEY" (possibly after an "EC PARAMETERS" block, as
// `openssl ecparam -genkey` writes), PKCS#8 "PRIVATE KEY", and PKCS#1
// "RSA PRIVATE KEY". Encrypted keys are rejected: detour starts unattended.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found (want EC PRIVATE KEY, PRIVATE KEY or RSA PRIVATE KEY)")
		}
		if _, encrypted := block.Headers["Proc-Type"]; encrypted || block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, errors.New("key is encrypted; detour needs an unencrypted key (protect it with file mode 0600)")
		}
		var key any
		var err error
		switch block.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue // e.g. EC PARAMETERS
		}
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", block.Type, err)
		}
		switch k := key.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			if k.N.BitLen() < minRSABits {
				return nil, fmt.Errorf("RSA key of %d bits is too small (minimum %d)", k.N.BitLen(), minRSABits)
			}
			return k, nil
		default:
			return nil, fmt.Errorf("unsupported private key type %T (want ECDSA or RSA)", key)
		}
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// writeCA writes a newly generated CA. The key is written first and removed
// again if the certificate cannot be written, so a failure never leaves the
// half-pair that LoadOrCreate refuses to start with.
func writeCA(ca *CA, certFile, keyFile string) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return fmt.Errorf("mitm: encoding CA key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for _, f := range []string{keyFile, certFile} {
		if err := mkdirPrivate(filepath.Dir(f)); err != nil {
			return fmt.Errorf("mitm: creating directory for %s: %w", f, err)
		}
	}
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("mitm: writing CA key %s: %w", keyFile, err)
	}
	if err := writeFileAtomic(certFile, ca.CertPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return fmt.Errorf("mitm: writing CA certificate %s: %w", certFile, err)
	}
	return nil
}

// mkdirPrivate creates dir and any missing parents with mode 0700, and leaves
// directories that already exist alone. Modes are set with Chmod after
// creation because MkdirAll's mode is filtered by the umask.
func mkdirPrivate(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range missing {
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes data to a temporary file in path's directory with
// mode perm and renames it over path, so a crash or a concurrent reader never
// sees a partial key, and the key bytes never sit in a file with a wider mode.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Chmod, not the CreateTemp mode, because the umask does not apply to it.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// Make the rename durable; not every filesystem supports syncing a
	// directory, so a failure here is ignored.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
