// Package inject is detour's Kubernetes injector: the mutating admission
// webhook served by `detour inject` that adds the detour sidecar to the pods
// that opted in, so that nothing in the app's manifests changes.
//
// For each pod it is asked about, the webhook answers with an RFC 6902 JSON
// Patch that
//
//   - adds detour, as a native sidecar (an init container with restartPolicy
//     Always and a startupProbe on /readyz, Kubernetes ≥ 1.29) or, on older
//     clusters, as the first regular container;
//   - adds an init container, detour-trust, that writes the CA bundle (system
//     roots plus detour's CA) into an emptyDir shared with the app containers;
//   - adds to the app containers HTTPS_PROXY, HTTP_PROXY and NO_PROXY (both
//     cases), SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE,
//     NODE_EXTRA_CA_CERTS and NODE_USE_ENV_PROXY, never replacing a variable the
//     pod already sets (NO_PROXY lists are merged);
//   - or, with transparent interception (Config.Interception, annotation
//     detour.io/interception), no proxy variable but the four CA bundle
//     ones, and an init container, detour-redirect, that runs `detour
//     redirect install` with NET_ADMIN and NET_RAW to send the pod's
//     outbound connections to detour's transparent listener, sparing
//     detour's own uid;
//   - mounts the policy ConfigMap and the CA Secret (certificate and key) into
//     detour only; the app containers get the bundle and never the key.
//
// Which pods are asked about is the MutatingWebhookConfiguration's business
// (the Helm chart in charts/detour: pod label or namespace label, and an
// objectSelector that leaves detour's own pods alone). The webhook itself
// needs no Kubernetes API access: everything it decides comes from its
// Config file and from the pod's annotations (see the Annotation constants).
//
// This package must not import the proxy or its sub-packages: the injector is
// a separate program, cmd/detour-webhook, that shares only the image (`detour
// inject` execs it), and it must stay small enough to audit on its own. It
// depends on k8s.io/api types only, and nothing in the sidecar's binary may
// import it: those types would cost every pod's sidecar memory.
package inject
