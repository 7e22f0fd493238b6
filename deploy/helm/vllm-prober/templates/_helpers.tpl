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

{{/* Namespaces discovery looks in: discovery.namespaces, else the release's. */}}
{{- define "vllm-prober.discoveryNamespaces" -}}
{{- if .Values.discovery.namespaces -}}
{{- toYaml .Values.discovery.namespaces -}}
{{- else -}}
{{- toYaml (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/*
The discovery sections appended to config.yml when discovery.enabled:
kubernetes_sd_configs (role pod and/or role service) and the relabel_configs
that keep the OpenAI API port, name each target <namespace>.<pod or service>
and take the model from a label (docs/discovery.md, "Kubernetes").
*/}}
{{- define "vllm-prober.discoveryConfig" -}}
{{- $d := .Values.discovery -}}
{{- $ns := include "vllm-prober.discoveryNamespaces" . -}}
kubernetes_sd_configs:
{{- if $d.pods.enabled }}
  - role: pod
    namespaces:
      names:
        {{- $ns | nindent 8 }}
    {{- if $d.pods.selector }}
    selectors:
      - role: pod
        label: {{ $d.pods.selector | quote }}
    {{- end }}
{{- end }}
{{- if $d.services.enabled }}
  - role: service
    namespaces:
      names:
        {{- $ns | nindent 8 }}
    {{- if $d.services.selector }}
    selectors:
      - role: service
        label: {{ $d.services.selector | quote }}
    {{- end }}
{{- end }}
relabel_configs:
  # Pods: only running ones, on the container port of the OpenAI API.
  - source_labels: [__meta_kubernetes_pod_phase]
    regex: "|Running"
    action: keep
  {{- if $d.pods.portNumber }}
  - source_labels: [__meta_kubernetes_pod_name, __meta_kubernetes_pod_container_port_number]
    regex: ";.*|.+;{{ $d.pods.portNumber }}"
    action: keep
  {{- else }}
  - source_labels: [__meta_kubernetes_pod_name, __meta_kubernetes_pod_container_port_name]
    regex: ";.*|.+;{{ $d.pods.portName }}"
    action: keep
  {{- end }}
  # Services: the port of the OpenAI API.
  - source_labels: [__meta_kubernetes_service_name, __meta_kubernetes_service_port_name, __meta_kubernetes_pod_name]
    regex: ";.*|.+;{{ $d.services.portName }};|.*;.*;.+"
    action: keep
  # Target name: <namespace>.<service>, or <namespace>.<pod> for a pod. No
  # namespace or pod label: Prometheus sets those to the prober's own.
  - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_service_name]
    regex: "(.+);(.+)"
    target_label: __target_name__
    replacement: "$1.$2"
  - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name]
    regex: "(.+);(.+)"
    target_label: __target_name__
    replacement: "$1.$2"
  {{- if $d.modelLabel }}
  {{- $l := regexReplaceAll "[^a-zA-Z0-9_]" $d.modelLabel "_" }}
  # The served model from a label, when present (else /v1/models).
  - source_labels: [__meta_kubernetes_pod_label_{{ $l }}, __meta_kubernetes_service_label_{{ $l }}]
    regex: "(.+);.*|;(.+)"
    target_label: __model__
    replacement: "$1$2"
  {{- end }}
  {{- range $target, $label := $d.labels }}
  {{- $l := regexReplaceAll "[^a-zA-Z0-9_]" $label "_" }}
  - source_labels: [__meta_kubernetes_pod_label_{{ $l }}, __meta_kubernetes_service_label_{{ $l }}]
    regex: "(.+);.*|;(.+)"
    target_label: {{ $target }}
    replacement: "$1$2"
  {{- end }}
  {{- with $d.relabelConfigs }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* config.yml: .Values.config, and the discovery sections when enabled. */}}
{{- define "vllm-prober.config" -}}
{{- if and .Values.discovery.enabled (or (hasKey .Values.config "kubernetes_sd_configs") (hasKey .Values.config "relabel_configs")) -}}
{{- fail "discovery.enabled writes kubernetes_sd_configs and relabel_configs: put extra rules in discovery.relabelConfigs, or disable discovery to write your own" -}}
{{- end -}}
{{- if and .Values.urlProbes.enabled (hasKey .Values.config "url_probes") -}}
{{- fail "urlProbes.enabled writes url_probes: set it through urlProbes, not config.url_probes" -}}
{{- end -}}
{{- toYaml .Values.config }}
{{- if .Values.discovery.enabled }}
{{ include "vllm-prober.discoveryConfig" . }}
{{- end }}
{{- if .Values.urlProbes.enabled }}
url_probes:
  allowed_urls:
    {{- toYaml .Values.urlProbes.allowedURLs | nindent 4 }}
  {{- with .Values.urlProbes.modules }}
  modules:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  token_budget_per_hour: {{ .Values.urlProbes.tokenBudgetPerHour }}
{{- end }}
{{- end -}}

{{/* Kinds discovery lists and watches: pods and/or services. */}}
{{- define "vllm-prober.discoveryResources" -}}
{{- if .Values.discovery.pods.enabled }}
- pods
{{- end }}
{{- if .Values.discovery.services.enabled }}
- services
{{- end }}
{{- end -}}

{{/* Name of the pods' ServiceAccount. */}}
{{- define "vllm-prober.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vllm-prober.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
