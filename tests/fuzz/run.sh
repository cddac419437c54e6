#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run.sh - runs libFuzzer targets, each for FUZZ_SECONDS (default 45) from
# its seed corpus, FUZZ_JOBS of them at a time (default: one per core), and
# fails when any of them crashes, leaks, times out, runs out of memory,
# trips a sanitizer or breaks one of its assertions. make fuzz-short runs
# it from the build directory: bash tests/fuzz/run.sh tests/fuzz/fuzz-proto ...
#
# For each target fuzz-NAME: the seeds are $top_srcdir/tests/fuzz/corpus/NAME
# (read only), the inputs it finds go to tests/fuzz/work/NAME (kept, so the next
# run starts from them), its log to tests/fuzz/NAME.log, and a failing input to
# tests/fuzz/artifacts/NAME-*. FUZZ_ARGS adds libFuzzer options to every run.
# Prints one line per target: inputs run, their rate, coverage (edges and
# features, as libFuzzer counts them) and the size of the corpus.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$PWD}"
secs=${FUZZ_SECONDS:-45}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
cd "$top_builddir" || exit 1
mkdir -p tests/fuzz/work tests/fuzz/artifacts

# Every sanitizer report is fatal; leaks are checked after each input.
export ASAN_OPTIONS="detect_leaks=1:symbolize=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# fuzz_one TARGET: runs it and leaves its verdict in tests/fuzz/NAME.result: one
# line when it passed, the end of its log when it FAILED.
fuzz_one() {
	local t=$1 name=${1##*/fuzz-} dict start took rc runs done_line cov ft corp
	local log=tests/fuzz/$name.log
	local opts=(-max_total_time="$secs" -detect_leaks=1 -timeout=10
		-rss_limit_mb=2048 -print_final_stats=1
		-artifact_prefix="tests/fuzz/artifacts/$name-")

	dict=$name
	case $name in
	admin)
		# famd's own log (stderr) stays out of the run's log; libFuzzer
		# and the sanitizers still report there.
		opts+=(-close_fd_mask=2 -max_len=8192) ;;
	memory | dpu)
		dict=proto
		opts+=(-close_fd_mask=2 -max_len=16384) ;;
	client)
		dict=proto
		opts+=(-max_len=16384) ;;
	esac
	if [ -f "$top_srcdir/tests/fuzz/dict/$dict.dict" ]; then
		opts+=(-dict="$top_srcdir/tests/fuzz/dict/$dict.dict")
	fi
	mkdir -p "tests/fuzz/work/$name"
	start=$SECONDS
	# shellcheck disable=SC2086
	"$top_builddir/$t" "${opts[@]}" ${FUZZ_ARGS:-} "tests/fuzz/work/$name" \
		"$top_srcdir/tests/fuzz/corpus/$name" >"$log" 2>&1
	rc=$?
	took=$((SECONDS - start))
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
	corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
	if [ "$rc" -ne 0 ] || [ -z "$done_line" ] ||
		grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|^SUMMARY: |deadly signal' "$log"; then
		{
			echo "fuzz-$name: FAILED (exit $rc after $took s); the end of $log:"
			tail -n 60 "$log"
			ls -l tests/fuzz/artifacts/"$name"-* 2>/dev/null
		} >"tests/fuzz/$name.result"
		return 1
	fi
	echo "fuzz-$name: ${runs:-?} inputs in $took s ($(( ${runs:-0} / (took > 0 ? took : 1) ))/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}: no crash, leak or sanitizer report" \
		>"tests/fuzz/$name.result"
}

running=0
for t in "$@"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	rm -f "tests/fuzz/${t##*/fuzz-}.result"
	fuzz_one "$t" &
	running=$((running + 1))
done
wait
failed=0
for t in "$@"; do
	result=tests/fuzz/${t##*/fuzz-}.result
	if [ ! -s "$result" ]; then
		echo "fuzz-${t##*/fuzz-}: no result"
		failed=1
		continue
	fi
	cat "$result"
	grep -q '^fuzz-[a-z]*: FAILED' "$result" && failed=1
done
exit $failed
