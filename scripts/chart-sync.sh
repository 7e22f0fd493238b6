#!/usr/bin/env bash
# chart-sync.sh DIR copies the Prometheus rule files of alerts/ (every
# alerts/*.yml is a rule file; the generator's input is mixin/slo.yml) and the Grafana dashboards of dashboards/ into
# DIR/alerts and DIR/dashboards of the Helm chart, and the Pyrra SLOs of
# alerts/slo into DIR/pyrra, removing stale copies, so
# that the chart's templates can read them with .Files.Get.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${1:?usage: chart-sync.sh CHART_FILES_DIR}
rm -rf "$dest/alerts" "$dest/dashboards" "$dest/pyrra"
mkdir -p "$dest/alerts" "$dest/dashboards" "$dest/pyrra"

shopt -s nullglob
for f in alerts/*.yml; do
	cp "$f" "$dest/alerts/"
done
for f in dashboards/*.json; do
	cp "$f" "$dest/dashboards/"
done
# The Pyrra ServiceLevelObjectives (alerts/slo/*.pyrra.yml), one object per file.
for f in alerts/slo/*.pyrra.yml; do
	cp "$f" "$dest/pyrra/"
done
echo ">> synced $(ls "$dest/alerts" | wc -l) rule files, $(ls "$dest/dashboards" | wc -l) dashboards and $(ls "$dest/pyrra" | wc -l) Pyrra SLOs into $dest"
