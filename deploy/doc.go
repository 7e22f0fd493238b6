// Package deploy holds the deployment artefacts of vllm_prober (the Helm chart in
// helm/vllm-prober and the docker-compose demo stack in compose) and their tests.
//
// The tests render the chart with helm when it is on PATH (or named by $HELM)
// and always with a small built-in renderer of the Go-template subset the chart
// uses, so the rendered PrometheusRule is checked against alerts/ on machines
// without helm too. With VLLM_PROBER_REQUIRE_HELM=1 (set by .ci/run once it has
// installed helm) a missing helm is an error instead.
package deploy
