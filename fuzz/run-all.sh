#!/bin/sh
# Builds every fuzz target (no sanitizer: AddressSanitizer needs nightly) and runs each for
# SECONDS, one at a time, single process. Prints executions, exec/s, coverage (cov) and
# features (ft) per target from libFuzzer's final stats; exits non-zero if any target crashed,
# leaked past the RSS limit or timed out on an input (crash inputs land in fuzz/artifacts/).
# Usage: fuzz/run-all.sh SECONDS [TARGET...]; SECONDS=0 only replays the corpora once, without
# mutating (every seed and every input found so far, under overflow checks).
# Environment: FUZZ_LOG_DIR (default fuzz/logs) keeps each target's full libFuzzer output.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:?usage: run-all.sh SECONDS [TARGET...]}
shift
targets=${*:-"kallsyms_text table_decode image vmlinux_elf module_elf loader_detect btf livepatch_check livepatch_convert package symvers"}
logs=${FUZZ_LOG_DIR:-$here/logs}
mkdir -p "$logs"
cd "$here"

# One cargo build at a time on shared machines.
lock=""
command -v flock >/dev/null 2>&1 && lock="flock /tmp/cargo.lock"
$lock cargo fuzz build -s none
./gen-corpus.sh >/dev/null

bin=$here/target/x86_64-unknown-linux-gnu/release
status=0
printf '%-18s %12s %8s %7s %7s %8s %s\n' target executions exec/s cov ft rss_mb result
for t in $targets; do
    # Inputs up to 64 KiB (kernel images: 128 KiB). Any input that makes a target allocate
    # beyond 2 GiB in total, or 512 MiB at once, or run 10 s, is a finding.
    max_len=65536
    [ "$t" = image ] && max_len=131072
    mkdir -p "corpus/$t" "artifacts/$t"
    log=$logs/$t.log
    rc=0
    if [ "$secs" -eq 0 ]; then
        time_flag=-runs=0
    else
        time_flag=-max_total_time=$secs
    fi
    "$bin/$t" "corpus/$t" \
        "$time_flag" -max_len="$max_len" -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -timeout=10 -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
    if [ "$rc" -eq 0 ]; then
        result=clean
    else
        result="CRASH (exit $rc; see $log and artifacts/$t/)"
        status=1
    fi
    printf '%-18s %12s %8s %7s %7s %8s %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "${rss:-?}" "$result"
done
exit $status
