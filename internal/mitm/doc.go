// Package mitm is detour's certificate authority: it creates or loads the CA
// that apps are told to trust, signs short-lived leaf certificates for the few
// vendor hosts detour intercepts, and writes the CA bundle handed to apps.
//
// detour never uses goproxy's built-in CA or leaf signer. goproxy's CA private
// key is published in its source, so anyone could impersonate any host to an
// app that trusts it; and its leaf signer seeds its generator from public
// data. Every key and serial here comes from crypto/rand, and the CA is
// generated per install.
//
// Keys are ECDSA P-256 rather than RSA: an RSA-2048 key takes about 80 ms to
// generate and 1.3 ms to sign with, against about 20 µs for P-256 (goproxy
// issues #430, #338), and P-256 is accepted by every TLS client detour serves.
// A whole P-256 leaf (key, signature, parse) costs about 0.2 ms
// (BenchmarkSignLeaf); a cached one about 0.2 µs.
//
// This package must not import other detour packages. It is a leaf that the
// proxy and the CLI both use, and keeping it free of policy and proxy code lets
// the code that holds the CA key be read and audited on its own.
package mitm
