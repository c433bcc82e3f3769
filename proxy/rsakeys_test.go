package proxy_test

import (
	"crypto/rand"
	"crypto/rsa"
	"sync"
	"testing"
)

// rsaKeys are the service-account keys of the Vertex tests, generated on
// first use and shared by every test of the package: a 2048-bit RSA key
// takes some 0.2 s of CPU under -race, and a test reads its key (the fake
// token endpoint checks signatures with the public half) without changing
// it. Two are enough: a test that needs a key the endpoint does not trust
// takes the other one.
var rsaKeys [2]func() (*rsa.PrivateKey, error)

func init() {
	for i := range rsaKeys {
		rsaKeys[i] = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })
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
