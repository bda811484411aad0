#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for FUZZTIME each (default 5s),
# one at a time (make test: 3s each; make fuzz: longer). A target fails on a
# failing input, which `go test -fuzz` writes to the package's
# testdata/fuzz/<target>/ (commit it: it becomes a regression seed).
#
# Go 1.26's fuzz coordinator can stop a duration-bounded run with a bare
# "context deadline exceeded" at the -fuzztime boundary when the machine is
# busy (golang/go#75804, fixed in Go 1.27); such a run, with no failing input
# written, is retried once, and fails if it happens again.
#
# With --build DIR it runs nothing: it compiles each package's
# fuzz-instrumented test binary into DIR, which puts that build in the Go
# build cache (make prebuild: CI compiles it beside make deps, so make test's
# fuzz step starts fuzzing at once instead of compiling for a minute a package).
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}
targets=(
	"./internal/detectcli FuzzDetectCSV"
	"./internal/results FuzzLoadDir"
	"./internal/results FuzzReadHLog"
	"./internal/results FuzzReadSeries"
	"./internal/results FuzzParseBudgets"
	"./internal/engine FuzzParseConfig"
	"./internal/influxdb FuzzInfluxConfig"
	"./demo FuzzHTTPHandlers"  # its own module: run from demo/
)
if [ "${1:-}" = --build ]; then
	out=$(cd "${2:?usage: fuzz.sh --build DIR}" && pwd) || exit 2
	declare -A seen=()
	for t in "${targets[@]}"; do
		read -r pkg name <<<"$t"
		[ -n "${seen[$pkg]:-}" ] && continue
		seen[$pkg]=1
		dir=. p=$pkg
		if [ "$pkg" = ./demo ]; then dir=demo p=.; fi
		# one target names the package's instrumented build (the same for all its targets)
		(cd "$dir" && "$GO" test -c -fuzz "^${name}\$" -o "$out/fuzz-${pkg//\//_}.test" "$p") || exit 1
	done
	exit 0
fi
failed=0
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	dir=.
	if [ "$pkg" = ./demo ]; then dir=demo pkg=.; fi
	for attempt in 1 2; do
		t0=$SECONDS
		out=$(cd "$dir" && "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1)
		rc=$?
		if [ $rc -eq 0 ]; then
			printf 'ok    %-18s %-20s %3ds\n' "$name" "$pkg" $((SECONDS - t0))
			break
		fi
		if [ $attempt -eq 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
			echo "retry $name: the fuzz coordinator stopped on its own deadline with no failing input (golang/go#75804)"
			continue
		fi
		echo "$out"
		printf 'FAIL  %-18s %-20s\n' "$name" "$pkg"
		failed=1
		break
	done
done
echo "fuzzing took $((SECONDS - start))s (FUZZTIME=$FUZZTIME per target)"
exit $failed
