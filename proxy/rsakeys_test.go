package proxy_test

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"testing"
)

// rsaKeys are the service-account keys of the Vertex tests, shared by every
// test of the package: a test reads its key (the fake token endpoint checks
// signatures with the public half) without changing it. They are fixed
// 2048-bit keys in testdata, made for these tests and trusted by nothing
// else, because generating one under -race costs 0.1 to 1 s of CPU (the
// search for primes is random). Two are enough: a test that needs a key the
// endpoint does not trust takes the other one.
var rsaKeys [2]func() (*rsa.PrivateKey, error)

func init() {
	for i := range rsaKeys {
		rsaKeys[i] = sync.OnceValues(func() (*rsa.PrivateKey, error) {
			file := fmt.Sprintf("testdata/service-account-%d.pem", i)
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			block, _ := pem.Decode(data)
			if block == nil {
				return nil, fmt.Errorf("%s: no PEM block", file)
			}
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			rsaKey, ok := key.(*rsa.PrivateKey)
			if !ok || rsaKey.N.BitLen() != 2048 {
				return nil, fmt.Errorf("%s: want a 2048-bit RSA key", file)
			}
			return rsaKey, nil
		})
	}
}

// serviceAccountKey returns shared key i (0 or 1).
func serviceAccountKey(t *testing.T, i int) *rsa.PrivateKey {
	t.Helper()
	key, err := rsaKeys[i]()
	if err != nil {
		t.Fatal(err)
	}
	return key
}
