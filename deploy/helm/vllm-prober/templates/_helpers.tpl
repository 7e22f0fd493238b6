{{/* Chart name, overridable. */}}
{{- define "vllm-prober.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name: release-chart, unless the release name already contains the chart name. */}}
{{- define "vllm-prober.fullname" -}}
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

{{- define "vllm-prober.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-prober.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vllm-prober.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "vllm-prober.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Name of the Secret holding the API keys. */}}
{{- define "vllm-prober.secretName" -}}
{{- if .Values.existingSecret -}}
{{- .Values.existingSecret -}}
{{- else -}}
{{- printf "%s-api-keys" (include "vllm-prober.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Number of replicas: one per shard when sharding, else one. */}}
{{- define "vllm-prober.replicas" -}}
{{- if .Values.sharding.enabled -}}
{{- .Values.sharding.shards -}}
{{- else -}}
1
{{- end -}}
{{- end -}}
