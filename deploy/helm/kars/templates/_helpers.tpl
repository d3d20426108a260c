{{/*
Labels every object of this chart carries beyond deploy/base's: the two Helm conventions, and nothing else
(apps/cli/src/deploy/helm.test.ts strips exactly these before diffing against kubectl kustomize deploy/base).
*/}}
{{- define "kars.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* deploy/base's kustomization adds app.kubernetes.io/part-of: kars to every object's labels (not selectors). */}}
{{- define "kars.labels" -}}
app.kubernetes.io/part-of: kars
{{ include "kars.helmLabels" . }}
{{- end }}

{{/* The controller's namespace. */}}
{{- define "kars.namespace" -}}
{{- required "namespace.name is required" .Values.namespace.name -}}
{{- end }}

{{/* An image reference from {repository, tag, digest}: repository@digest when a digest is given. */}}
{{- define "kars.image" -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ required "an image tag (or digest) is required" .tag }}
{{- end -}}
{{- end }}

{{/* A sandbox's namespace: its own, or sandbox-<name>. */}}
{{- define "kars.sandboxNamespace" -}}
{{- .namespace | default (printf "sandbox-%s" .name) -}}
{{- end }}
