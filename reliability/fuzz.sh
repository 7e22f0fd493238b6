#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module (each func FuzzXxx(f *testing.F)
# in a _test.go file) for a short budget: FUZZTIME (default 20000x, i.e. 20,000
# executions) of fuzzing with at most 1s spent minimising a failing input, so
# that a crasher is reported quickly. `go test -fuzz` takes one package and one
# target at a time, hence the loop. Seed corpora (testdata/fuzz/FuzzXxx) run as
# part of every fuzz run.
#
# Why a count and not a duration: with a duration (-fuzztime 3s), Go up to 1.26
# can fail a target with a bare "context deadline exceeded" and no crasher when
# the deadline races a busy worker (https://go.dev/issue/75804, fixed in Go 1.27).
# It happened in this project's CI on a loaded 2-core machine. A count has no
# deadline: a slow machine only takes longer. Durations still work when asked for.
#
#   reliability/fuzz.sh                   # every target, 20,000 executions each
#   FUZZTIME=200000x reliability/fuzz.sh  # longer
#   FUZZTIME=30s reliability/fuzz.sh      # by time (see the Go bug above)
#   reliability/fuzz.sh ./prober/...      # only the targets under these paths
#
# Exit status: 1 as soon as a target fails (its failing input is saved under
# testdata/fuzz/ of its package by go test), 1 when no target is found.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20000x}
case $FUZZTIME in *[0-9]) FUZZTIME=${FUZZTIME}s ;; esac

roots=("$@")
[ ${#roots[@]} -eq 0 ] && roots=(.)
for i in "${!roots[@]}"; do roots[i]=${roots[i]%/...}; done

found=0
while IFS= read -r file; do
	dir=./$(dirname "$file")
	for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$file"); do
		found=$((found + 1))
		echo ">> fuzz $dir $name for $FUZZTIME"
		"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 1s "$dir"
	done
done < <(find "${roots[@]}" -name '*_test.go' -not -path '*/.git/*' -not -path '*/testdata/*' | sed 's|^\./||' | sort)
if [ "$found" -eq 0 ]; then
	echo "fuzz.sh: no fuzz target (func FuzzXxx(f *testing.F)) found under ${roots[*]}" >&2
	exit 1
fi
echo ">> ran $found fuzz targets for $FUZZTIME each"
