//go:debug tlsmlkem=0
package sdkcheck

// The go:debug line above: the end-to-end tests moved here from proxy make
// hundreds of loopback TLS handshakes (the app's to detour's MITM
// listener, detour's to the fake vendors), and they agree on X25519 alone,
// without the post-quantum X25519MLKEM768 share the runtime adds by
// default, as in proxy's and internal/chain's tests. No test here is about
// the key exchange, and the sidecar's own default is untouched (the
// directive applies to this test binary only).
