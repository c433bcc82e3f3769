// Package sdkcheck has no code: its tests hold what detour writes to the
// official vendor SDKs. openai-go, anthropic-sdk-go and go-genai decode
// what the codecs' encoders (rewrite/openai, rewrite/anthropic,
// rewrite/gemini, rewrite/responses), Synthesize (rewrite/translate), the
// fake vendors (internal/fakevendor), the demo's client (internal/demo) and
// the chain's error answers (internal/chain) produce, and say whether an
// app would see what detour meant.
//
// They live in one package, apart from the code they test, because a
// package whose tests import an SDK links it into its test binary on every
// `go test` run, and the SDKs (go-genai with Google's auth and gRPC above
// all) were most of the race suite's link time, once per package that used
// them. Here they are linked once. The rest of each package's tests (its
// goldens, round trips and fuzz targets that need no SDK) stay beside its
// code. proxy's end-to-end tests that drive detour with the SDKs as the apps
// are here too (proxy_*_test.go), through internal/detourtest's harness.
package sdkcheck
