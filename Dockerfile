# syntax=docker/dockerfile:1
#
# detour's container image: two static Go binaries on distroless "static"
# (CA certificates, tzdata, /etc/passwd with the nonroot user; no shell, no
# libc). The same image runs the sidecar (`detour serve`, the default
# command), the CA bundle init container (`detour ca bundle`) and the
# Kubernetes injector (`detour inject`, which execs detour-webhook: the
# webhook is a binary of its own so that the Kubernetes types it decodes
# stay out of the sidecar's binary and memory).
#
#   docker build -t detour .
#   docker build --build-arg BASE_IMAGE=cgr.dev/chainguard/static:latest -t detour .
#
# Filesystem contract (everything else is read-only; run with --read-only /
# readOnlyRootFilesystem: true):
#
#   /usr/local/bin/detour            the binary (ENTRYPOINT)
#   /usr/local/bin/detour-webhook    the injector, run by `detour inject`
#   /etc/detour/policy/policy.json   the default policy (the repository's
#                                    policy.json). Mount a directory over
#                                    /etc/detour/policy to replace it; detour
#                                    watches the directory, so a Kubernetes
#                                    ConfigMap's symlink swap hot-reloads it.
#   /var/run/secrets/detour/         detour's CA: ca.pem and ca-key.pem. With
#                                    XDG_CONFIG_HOME=/var/run/secrets this is
#                                    detour's default CA location, used when
#                                    the policy has no "ca" section. Mount the
#                                    CA Secret here (read-only), or a writable
#                                    volume on which detour creates the CA at
#                                    first start (owned by UID 65532 so that a
#                                    new Docker named volume is writable).
#
# Nothing is declared with VOLUME: an anonymous volume would silently give a
# new CA on every `docker run`, which every app would have to re-trust.

ARG GO_VERSION=1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# GOTOOLCHAIN=local: build with the image's Go, never download another one.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/detour . \
 && GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/detour-webhook ./cmd/detour-webhook \
 && mkdir -p /out/etc/detour/policy /out/var/run/secrets/detour \
 && cp policy.json /out/etc/detour/policy/policy.json

FROM ${BASE_IMAGE}
ARG VERSION=dev
LABEL org.opencontainers.image.title="detour" \
      org.opencontainers.image.description="Egress sidecar: transparent failover for LLM API calls" \
      org.opencontainers.image.source="https://github.com/detour-proxy/detour" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/usr/local/bin/detour /out/usr/local/bin/detour-webhook /usr/local/bin/
COPY --from=build /out/etc/detour/policy/policy.json /etc/detour/policy/policy.json
COPY --from=build --chown=65532:65532 /out/var/run/secrets/detour /var/run/secrets/detour
ENV XDG_CONFIG_HOME=/var/run/secrets
# distroless's "nonroot"; numeric so that runAsNonRoot can verify it.
USER 65532:65532
# 8787: proxy (policy listen); 8788: admin, /healthz and /readyz (admin_listen);
# 8443: the injector's webhook (detour inject).
EXPOSE 8787 8788 8443
ENTRYPOINT ["/usr/local/bin/detour"]
CMD ["serve", "--policy", "/etc/detour/policy/policy.json"]
