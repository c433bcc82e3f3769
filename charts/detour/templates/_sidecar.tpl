{{/*
Without the webhook: named templates that add to your own pod template the
same sidecar the injector adds (internal/inject/spec.go; the chart test checks
that they agree). Each renders YAML list items; indent them under the
matching list:

  spec:
    template:
      spec:
        initContainers:
          {{- include "detour.sidecar.initContainers" . | nindent 10 }}
        containers:
          {{- with include "detour.sidecar.containers" . }}{{ . | nindent 10 }}{{ end }}
          - name: app
            env:
              {{- include "detour.sidecar.appEnv" . | nindent 14 }}
            volumeMounts:
              {{- include "detour.sidecar.appVolumeMounts" . | nindent 14 }}
        volumes:
          {{- include "detour.sidecar.volumes" . | nindent 10 }}

"detour.sidecar.containers" is empty with native sidecars (hence the
"with"); keep the line, it fills in on older clusters. From a parent chart that has detour as a
dependency, pass the detour values and this chart's identity:

  {{- $detour := dict "Values" .Values.detour "Release" .Release "Capabilities" .Capabilities
        "Chart" (dict "Name" "detour" "Version" "0.1.0" "AppVersion" "0.1.0") }}
  {{- include "detour.sidecar.initContainers" $detour | nindent 10 }}

appEnv is for a container that sets none of these variables itself; if
yours does, keep its own and drop ours (the webhook does that for you).
*/}}

{{/* detour.sidecar.initContainers: detour-trust, detour-redirect when transparent, and detour itself when native. */}}
{{- define "detour.sidecar.initContainers" -}}
- {{ include "detour.sidecar.trustContainer" . | indent 2 | trim }}
{{- if eq (include "detour.transparent" .) "true" }}
- {{ include "detour.sidecar.redirectContainer" . | indent 2 | trim }}
{{- end }}
{{- if eq (include "detour.native" .) "true" }}
- {{ include "detour.sidecar.container" . | indent 2 | trim }}
  restartPolicy: Always
{{- end }}
{{- end -}}

{{/* detour.sidecar.containers: detour as the first regular container when not native. */}}
{{- define "detour.sidecar.containers" -}}
{{- if ne (include "detour.native" .) "true" -}}
- {{ include "detour.sidecar.container" . | indent 2 | trim }}
{{- end -}}
{{- end -}}

{{/* detour.sidecar.container: the detour container (without restartPolicy). */}}
{{- define "detour.sidecar.container" -}}
name: detour
image: {{ include "detour.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- $transparent := eq (include "detour.transparent" .) "true" }}
args: ["serve", "--policy", "/etc/detour/policy/policy.json"{{ if $transparent }}, "--transparent", "127.0.0.1:{{ int .Values.sidecar.transparent.port }}"{{ end }}]
env:
  # detour's default CA location is $XDG_CONFIG_HOME/detour: the CA Secret.
  - name: XDG_CONFIG_HOME
    value: /var/run/secrets
{{- $keys := include "detour.keysSecret" . }}
{{- if and $keys (eq .Values.keys.mode "env") }}
envFrom:
  - secretRef:
      name: {{ $keys }}
{{- end }}
resources:
  {{- toYaml .Values.sidecar.resources | nindent 2 }}
volumeMounts:
  - name: detour-policy
    mountPath: /etc/detour/policy
    readOnly: true
  - name: detour-ca
    mountPath: /var/run/secrets/detour
    readOnly: true
  # The admin token (the policy's admin.token_file): on the directory, not
  # by subPath, so that a rotated Secret reaches detour.
  - name: detour-admin-token
    mountPath: /var/run/secrets/detour-admin
    readOnly: true
{{- if .Values.state.redis.existingSecret }}
  # The fleet state's Redis password (policy state.redis.password_file).
  - name: detour-redis
    mountPath: /var/run/secrets/detour-redis
    readOnly: true
{{- end }}
{{- if and $keys (eq .Values.keys.mode "file") }}
  - name: detour-keys
    mountPath: /var/run/secrets/detour-keys
    readOnly: true
{{- end }}
startupProbe:
  httpGet: {path: /readyz, port: {{ int .Values.sidecar.adminPort }}, scheme: HTTP}
  periodSeconds: 1
  timeoutSeconds: 1
  failureThreshold: 120
readinessProbe:
  httpGet: {path: /readyz, port: {{ int .Values.sidecar.adminPort }}, scheme: HTTP}
  periodSeconds: 5
  timeoutSeconds: 1
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /healthz, port: {{ int .Values.sidecar.adminPort }}, scheme: HTTP}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
terminationMessagePolicy: FallbackToLogsOnError
securityContext:
  {{- if $transparent }}
  {{- /* The UID the redirect rules let pass. */}}
  {{- include "detour.nonRootSecurityContext" .Values.sidecar.transparent.uid | nindent 2 }}
  {{- else }}
  {{- include "detour.restrictedSecurityContext" . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/*
detour.sidecar.redirectContainer: installs the nftables rules that send the
pod's outbound connections to detour's transparent listener, sparing
detour's UID, and exits. UID 0 because Kubernetes' capabilities.add reaches
the effective set of UID 0 only (no ambient capabilities); every other
capability is dropped. It mounts nothing.
*/}}
{{- define "detour.sidecar.redirectContainer" -}}
name: detour-redirect
image: {{ include "detour.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args: ["redirect", "install", "--to-port", "{{ int .Values.sidecar.transparent.port }}", "--ports", "{{ join "," .Values.sidecar.transparent.redirectPorts }}", "--exclude-uid", "{{ int .Values.sidecar.transparent.uid }}"{{ range .Values.sidecar.transparent.excludeCIDRs }}, "--exclude-cidr", {{ . | quote }}{{ end }}]
resources:
  requests: {cpu: 10m, memory: 16Mi}
  limits: {memory: 64Mi}
terminationMessagePolicy: FallbackToLogsOnError
securityContext:
  runAsUser: 0
  runAsGroup: 0
  runAsNonRoot: false
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities:
    add: ["NET_ADMIN", "NET_RAW"]
    drop: ["ALL"]
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{/* detour.sidecar.trustContainer: writes system roots + detour's CA into the shared emptyDir. */}}
{{- define "detour.sidecar.trustContainer" -}}
name: detour-trust
image: {{ include "detour.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args: ["ca", "bundle", "--cert", "/var/run/detour/ca-cert/ca.pem", "--out", "/var/run/detour/trust/ca-bundle.pem"]
resources:
  requests: {cpu: 10m, memory: 16Mi}
  limits: {memory: 64Mi}
volumeMounts:
  - name: detour-ca-cert
    mountPath: /var/run/detour/ca-cert
    readOnly: true
  - name: detour-trust
    mountPath: /var/run/detour/trust
terminationMessagePolicy: FallbackToLogsOnError
securityContext:
  {{- include "detour.restrictedSecurityContext" . | nindent 2 }}
{{- end -}}

{{/* detour.sidecar.volumes: the pod volumes. The CA key is in detour-ca, mounted by detour only. */}}
{{- define "detour.sidecar.volumes" -}}
- name: detour-policy
  configMap:
    name: {{ include "detour.policyConfigMap" . }}
- name: detour-ca
  secret:
    secretName: {{ include "detour.caSecret" . }}
    # World-readable because detour runs as UID 65532 and the kubelet makes
    # Secret files root-owned; only detour's container mounts this volume.
    defaultMode: 0444
    items:
      - {key: ca.pem, path: ca.pem}
      - {key: ca-key.pem, path: ca-key.pem}
- name: detour-ca-cert
  secret:
    secretName: {{ include "detour.caSecret" . }}
    defaultMode: 0444
    items:
      - {key: ca.pem, path: ca.pem}
- name: detour-admin-token
  secret:
    secretName: {{ include "detour.adminTokenSecret" . }}
    defaultMode: 0444
    items:
      - {key: token, path: token}
- name: detour-trust
  emptyDir:
    medium: Memory
    sizeLimit: 4Mi
{{- $keys := include "detour.keysSecret" . }}
{{- if and $keys (eq .Values.keys.mode "file") }}
- name: detour-keys
  secret:
    secretName: {{ $keys }}
    defaultMode: 0444
{{- end }}
{{- with .Values.state.redis.existingSecret }}
- name: detour-redis
  secret:
    secretName: {{ . }}
    defaultMode: 0444
    items:
      - {key: {{ $.Values.state.redis.passwordKey | default "password" }}, path: password}
{{- end }}
{{- end -}}

{{/* detour.sidecar.appEnv: the variables of an app container; with transparent interception, the CA bundle's only. */}}
{{- define "detour.sidecar.appEnv" -}}
{{- if eq (include "detour.transparent" .) "true" -}}
- {name: SSL_CERT_FILE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: REQUESTS_CA_BUNDLE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: CURL_CA_BUNDLE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: NODE_EXTRA_CA_CERTS, value: /var/run/detour/trust/ca-bundle.pem}
{{- else -}}
{{- $proxy := printf "http://127.0.0.1:%d" (int .Values.sidecar.proxyPort) -}}
{{- $noProxy := join "," (concat (list "localhost" "127.0.0.1" "::1" "169.254.169.254" "169.254.0.0/16" ".svc" ".cluster.local") .Values.sidecar.noProxy) -}}
- {name: HTTPS_PROXY, value: {{ $proxy | quote }}}
- {name: https_proxy, value: {{ $proxy | quote }}}
- {name: HTTP_PROXY, value: {{ $proxy | quote }}}
- {name: http_proxy, value: {{ $proxy | quote }}}
- {name: NO_PROXY, value: {{ $noProxy | quote }}}
- {name: no_proxy, value: {{ $noProxy | quote }}}
- {name: SSL_CERT_FILE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: REQUESTS_CA_BUNDLE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: CURL_CA_BUNDLE, value: /var/run/detour/trust/ca-bundle.pem}
- {name: NODE_EXTRA_CA_CERTS, value: /var/run/detour/trust/ca-bundle.pem}
- {name: NODE_USE_ENV_PROXY, value: "1"}
{{- end -}}
{{- end -}}

{{/* detour.sidecar.appVolumeMounts: the bundle, read-only, in an app container. */}}
{{- define "detour.sidecar.appVolumeMounts" -}}
- name: detour-trust
  mountPath: /var/run/detour/trust
  readOnly: true
{{- end -}}
