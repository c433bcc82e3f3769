{{/*
Names, labels and the values every template shares. Each helper takes the
chart's root context, or a dict with the same keys (Values, Release, Chart,
Capabilities) when a parent chart calls the sidecar templates (see
_sidecar.tpl).
*/}}

{{/* detour.name: the chart name, or nameOverride. */}}
{{- define "detour.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* detour.fullname: the prefix of every resource name. */}}
{{- define "detour.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* detour.labels: the standard labels of every object. */}}
{{- define "detour.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "detour.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: detour
{{- end -}}

{{/* detour.selectorLabels: the labels that select the injector's pods. */}}
{{- define "detour.selectorLabels" -}}
app.kubernetes.io/name: {{ include "detour.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* detour.image: repository:tag, or repository@digest. */}}
{{- define "detour.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}
{{- end -}}

{{/* detour.namespaces: the namespaces detour serves, as a JSON list. */}}
{{- define "detour.namespaces" -}}
{{- if .Values.namespaces -}}
{{- toJson (uniq .Values.namespaces) -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* detour.native: "true" when detour is added as a native sidecar. */}}
{{- define "detour.native" -}}
{{- $v := toString .Values.sidecar.nativeSidecars -}}
{{- if eq $v "auto" -}}
{{- semverCompare ">=1.29.0-0" .Capabilities.KubeVersion.Version | toString -}}
{{- else if or (eq $v "true") (eq $v "false") -}}
{{- $v -}}
{{- else -}}
{{- fail (printf "sidecar.nativeSidecars is %q: want auto, true or false" $v) -}}
{{- end -}}
{{- end -}}

{{/* detour.transparent: "true" when the sidecar intercepts transparently (sidecar.interception). */}}
{{- define "detour.transparent" -}}
{{- $t := .Values.sidecar.transparent -}}
{{- $port := int $t.port -}}
{{- if or (eq $port (int .Values.sidecar.proxyPort)) (eq $port (int .Values.sidecar.adminPort)) }}
{{- fail (printf "sidecar.transparent.port %d is also sidecar.proxyPort or sidecar.adminPort: detour listens on each" $port) }}
{{- end }}
{{- range $t.redirectPorts }}
{{- if eq (int .) $port }}
{{- fail (printf "sidecar.transparent.redirectPorts holds %d, the transparent port: every connection to it would loop" $port) }}
{{- end }}
{{- end }}
{{- eq (toString .Values.sidecar.interception) "transparent" | toString -}}
{{- end -}}

{{/* The names of the objects the sidecar mounts, in each namespace. */}}
{{- define "detour.policyConfigMap" -}}
{{- .Values.policy.existingConfigMap | default (printf "%s-policy" (include "detour.fullname" .)) -}}
{{- end -}}

{{- define "detour.caSecret" -}}
{{- .Values.ca.existingSecret | default (printf "%s-ca" (include "detour.fullname" .)) -}}
{{- end -}}

{{- define "detour.adminTokenSecret" -}}
{{- .Values.admin.existingSecret | default (printf "%s-admin-token" (include "detour.fullname" .)) -}}
{{- end -}}

{{/* detour.keysSecret: "" when detour has no keys Secret. */}}
{{- define "detour.keysSecret" -}}
{{- if .Values.keys.existingSecret -}}
{{- .Values.keys.existingSecret -}}
{{- else if .Values.keys.values -}}
{{- printf "%s-keys" (include "detour.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* detour.injectorName: the injector's Deployment, Service and ServiceAccount. */}}
{{- define "detour.injectorName" -}}
{{- printf "%s-injector" (include "detour.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
detour.injectorConfig: the webhook's config file (internal/inject.Config). What
it says must stay what _sidecar.tpl writes: the chart test compares them.
*/}}
{{- define "detour.injectorConfig" -}}
{{- $c := dict
  "image" (include "detour.image" .)
  "imagePullPolicy" .Values.image.pullPolicy
  "nativeSidecars" (eq (include "detour.native" .) "true")
  "proxyPort" (int .Values.sidecar.proxyPort)
  "adminPort" (int .Values.sidecar.adminPort)
  "policyConfigMap" (include "detour.policyConfigMap" .)
  "caSecret" (include "detour.caSecret" .)
  "adminTokenSecret" (include "detour.adminTokenSecret" .)
  "keysMode" .Values.keys.mode
  "resources" .Values.sidecar.resources
-}}
{{- with include "detour.keysSecret" . }}{{ $_ := set $c "keysSecret" . }}{{ end -}}
{{- with .Values.sidecar.noProxy }}{{ $_ := set $c "noProxy" . }}{{ end -}}
{{- with .Values.state.redis.existingSecret }}{{ $_ := set $c "redisPasswordSecret" . }}{{ end -}}
{{- with .Values.state.redis.passwordKey }}{{ $_ := set $c "redisPasswordKey" . }}{{ end -}}
{{- /* Only when not the default, so that a proxy-env release renders as it always did. */ -}}
{{- $t := .Values.sidecar.transparent -}}
{{- $_ := include "detour.transparent" . -}}
{{- if ne .Values.sidecar.interception "proxy-env" }}{{ $_ := set $c "interception" .Values.sidecar.interception }}{{ end -}}
{{- if ne (int $t.port) 15001 }}{{ $_ := set $c "transparentPort" (int $t.port) }}{{ end -}}
{{- if ne (int $t.uid) 65531 }}{{ $_ := set $c "transparentUID" (int $t.uid) }}{{ end -}}
{{- if ne (toJson $t.redirectPorts) "[443,80]" }}{{ $_ := set $c "redirectPorts" $t.redirectPorts }}{{ end -}}
{{- with $t.excludeCIDRs }}{{ $_ := set $c "excludeCIDRs" . }}{{ end -}}
{{- toPrettyJson $c -}}
{{- end -}}

{{/*
detour.restrictedSecurityContext: every detour container's securityContext,
the "restricted" Pod Security Standard on its own (UID 65532 is
distroless's nonroot, as in the Dockerfile).
*/}}
{{- define "detour.restrictedSecurityContext" -}}
{{- include "detour.nonRootSecurityContext" 65532 -}}
{{- end -}}

{{/* detour.nonRootSecurityContext: the same, for the UID given as the context. */}}
{{- define "detour.nonRootSecurityContext" -}}
runAsUser: {{ int . }}
runAsGroup: {{ int . }}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
