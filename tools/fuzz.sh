#!/usr/bin/env bash
# fuzz.sh: fuzz every fuzz target in the tree for FUZZTIME on top of its
# committed seed corpus (testdata/fuzz/). A failing input is written to
# the package's testdata/fuzz/ for the test run, as go test -fuzz does.
#
# `go test -fuzz` links an instrumented test binary for every target;
# this builds one per package (go test -c -fuzz instruments the whole
# package) into bin/fuzz/, where a warm run finds it up to date, and runs
# each target from it in the package's directory with go test's corpus
# cache.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-4000x}
# FUZZPARALLEL: fuzzing workers per target (go test's default: one per core).
FUZZPARALLEL=${FUZZPARALLEL:-}
cache="$($GO env GOCACHE)/fuzz"
mkdir -p bin/fuzz
bins="$PWD/bin/fuzz"
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
	fns=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //')
	pkg=$($GO list "$dir")
	bin="$bins/$(echo "$pkg" | tr / _).test"
	first=${fns%%$'\n'*}
	$GO test -c -fuzz "^$first\$" -o "$bin" "$dir"
	for fn in $fns; do
		echo "fuzz $dir $fn $FUZZTIME"
		(cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^$fn\$" -test.fuzztime "$FUZZTIME" \
			${FUZZPARALLEL:+-test.parallel "$FUZZPARALLEL"} -test.fuzzcachedir "$cache/$pkg")
	done
done
