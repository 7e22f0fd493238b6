{{/*
The spec of the Argo Rollouts AnalysisTemplate and ClusterAnalysisTemplate
(docs/rollouts.md). {{ "{{args.NAME}}" }} is Argo's own placeholder, filled from
the AnalysisRun's args; every successCondition and failureCondition is guarded
by len(result) > 0, so no data (too few probes: the recording rules' guard)
makes a measurement Inconclusive, never Error.
*/}}
{{- define "vllm-prober.argoAnalysisSpec" -}}
{{- $r := .Values.rollouts -}}
args:
  # The group label value the canary and stable targets share.
  - name: group
  # The canary's target name in vllm_prober (its baseline comparison).
  - name: canary-target
  - name: window
    value: {{ $r.window | quote }}
  - name: max-latency-ratio
    value: {{ $r.maxLatencyRatio | quote }}
  - name: min-success-ratio
    value: {{ $r.minSuccessRatio | quote }}
  - name: min-probes
    value: {{ $r.minProbes | quote }}
  - name: prometheus-address
    value: {{ $r.prometheusAddress | quote }}
metrics:
  # The canary's slowest latency (TTFT, TPOT, ITL, E2E) relative to the stable's.
  - name: canary-stable-latency-ratio
    interval: {{ $r.argo.interval }}
    count: {{ $r.argo.count }}
    failureLimit: {{ $r.argo.failureLimit }}
    inconclusiveLimit: {{ $r.argo.inconclusiveLimit }}
    successCondition: {{ "len(result) > 0 && result[0] <= {{args.max-latency-ratio}}" | quote }}
    failureCondition: {{ "len(result) > 0 && result[0] > {{args.max-latency-ratio}}" | quote }}
    provider:
      prometheus:
        address: {{ "{{args.prometheus-address}}" | quote }}
        query: {{ "max({__name__=~\"group_module:vllm_probe_(ttft|tpot|itl|e2e)_seconds:canary_stable_ratio{{args.window}}\", group=\"{{args.group}}\"})" | quote }}
  # The canary's share of successful probes.
  - name: canary-success-ratio
    interval: {{ $r.argo.interval }}
    count: {{ $r.argo.count }}
    failureLimit: {{ $r.argo.failureLimit }}
    inconclusiveLimit: {{ $r.argo.inconclusiveLimit }}
    successCondition: {{ "len(result) > 0 && result[0] >= {{args.min-success-ratio}}" | quote }}
    failureCondition: {{ "len(result) > 0 && result[0] < {{args.min-success-ratio}}" | quote }}
    provider:
      prometheus:
        address: {{ "{{args.prometheus-address}}" | quote }}
        query: {{ "min(group_module_track:vllm_probe_success:ratio{{args.window}}{group=\"{{args.group}}\", track=\"canary\"})" | quote }}
  {{- if $r.baseline }}
  # The canary's worst regression ratio against its baseline
  # (vllm_probe_regression_ratio), once it has min-probes successful probes;
  # each vantage's worst, then the best vantage's (a slow path from one
  # vantage fails no canary).
  - name: canary-baseline-ratio
    interval: {{ $r.argo.interval }}
    count: {{ $r.argo.count }}
    failureLimit: {{ $r.argo.failureLimit }}
    inconclusiveLimit: {{ $r.argo.inconclusiveLimit }}
    successCondition: {{ "len(result) > 0 && result[0] <= {{args.max-latency-ratio}}" | quote }}
    failureCondition: {{ "len(result) > 0 && result[0] > {{args.max-latency-ratio}}" | quote }}
    provider:
      prometheus:
        address: {{ "{{args.prometheus-address}}" | quote }}
        query: {{ "min(max by (vantage) (vllm_probe_regression_ratio{target=\"{{args.canary-target}}\", metric=~\"ttft|tpot|itl|e2e\"})) and on () sum(increase(vllm_probe_time_to_first_token_seconds_count{target=\"{{args.canary-target}}\"}[{{args.window}}])) >= {{args.min-probes}}" | quote }}
  {{- end }}
{{- end -}}
