// Package clientmatrix holds the real-client matrix, and only that: its
// tests run unmodified apps on every runtime detour promises to reach
// (curl; Python's urllib and requests; Node 20 with the official openai,
// @anthropic-ai/sdk and @google/genai packages; Java's
// java.net.http.HttpClient; Go's net/http) against the real vendor host
// names, under `detour run` and in transparent mode, and check that each
// gets a failover answer, a stream delivered incrementally and the
// vendor's own error through detour.
//
// The apps are in testdata/ (node/ is installed by `npm ci` from its lock
// file; java/Client.java is compiled by the test; the three Node apps make
// their calls in one node process per way in, node/sdks.mjs). The package has no
// code of its own for detour to use.
package clientmatrix
