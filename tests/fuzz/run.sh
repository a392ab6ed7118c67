#!/bin/sh
# Runs one libFuzzer harness for a fixed time: `make fuzz` calls this once per
# harness (several at a time).
#   run.sh NAME SECONDS SRCDIR
# Runs tests/fuzz/fuzz_NAME (in the build folder) over the seeds in
# SRCDIR/tests/fuzz/corpus/NAME plus what earlier runs found (kept in
# tests/fuzz/work/NAME), writes tests/fuzz/out/NAME.log, and prints one line:
# "PASS: fuzz_NAME ..." or "FAIL: fuzz_NAME ..." with the reproducer.  Exits 0
# on PASS, 1 on FAIL.
set -u
name=$1 secs=$2 srcdir=$3
bin=tests/fuzz/fuzz_$name
work=tests/fuzz/work/$name
out=tests/fuzz/out/$name
log=tests/fuzz/out/$name.log
mkdir -p "$work" "$out"
rm -f "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* "$out"/slow-unit-*
# -timeout: one input taking longer than this is a finding (a hang);
# a hard stop a minute past the budget catches a stuck fuzzer.
ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	timeout $((secs + 60)) "./$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$out/" "$work" "$srcdir/tests/fuzz/corpus/$name" \
	>"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" -eq 0 ]; then
	echo "PASS: fuzz_$name (${runs:-?} runs in ${secs}s)"
	exit 0
fi
what=$(grep -m 1 -E '^SUMMARY: |ERROR: libFuzzer|Assertion .* failed' "$log" || true)
repro=$(ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null | head -n 1)
[ "$rc" -eq 124 ] && what="did not stop within $((secs + 60))s"
echo "FAIL: fuzz_$name: ${what:-exit status $rc} (log: $log${repro:+; reproduce: ./$bin $repro})"
exit 1
