#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target (func FuzzXxx in a _test.go file) of the
# module for FUZZTIME (default 5s) each. `go test -fuzz` takes one package and
# one target at a time, hence the loop.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

found=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$file"); do
		found=$((found + 1))
		echo ">> fuzz ./$dir $name for $FUZZTIME"
		"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir"
	done
done < <(find . -name '*_test.go' -not -path './.git/*' | sed 's|^\./||' | sort)
echo ">> ran $found fuzz targets"
