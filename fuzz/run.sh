#!/usr/bin/env bash
# Runs every libFuzzer harness (or those named) for a bounded time on its
# committed seed corpus, under ASan + UBSan, and prints one line of figures
# per harness: executions, executions per second, coverage (edges, features),
# corpus size. Any sanitizer report, crash, leak, timeout, allocation over
# the limits or unexpected exception fails the run (exit 1) and keeps the
# input under $FUZZ_OUT/artifacts/.
#
#   fuzz/run.sh [SECONDS] [HARNESS...]      (default 20 s, all harnesses)
# Environment: BUILD_DIR (build/fuzz), FUZZ_OUT (a temporary directory),
# FUZZ_JOBS (harnesses run side by side; default: the number of cores).
# New inputs go to $FUZZ_OUT/corpus/<name>; the committed corpus is only read.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${1:-20}
shift || true
BUILD_DIR=${BUILD_DIR:-build/fuzz}
OUT=${FUZZ_OUT:-$(mktemp -d /tmp/hymba-fuzz.XXXXXX)}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
ALL=(safetensors config tokenizer_json tokenizer_config sentencepiece torch_checkpoint train_state optimizer_state
     serve_request gguf)
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=("${ALL[@]}")

# Any report is fatal; leaks too (detect_leaks is libFuzzer's default).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}

mkdir -p "$OUT/artifacts" "$OUT/logs"
run_one() {
  local name=$1 bin="$BUILD_DIR/fuzz/fuzz_$1"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; return 1; }
  mkdir -p "$OUT/corpus/$name"
  # -rss_limit_mb: a parser may not need 2 GB on any input; -malloc_limit_mb:
  # nor one allocation of 512 MB (a size taken from the file, unchecked);
  # -timeout: nor 10 s on one input.
  "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$OUT/artifacts/$name-" "$OUT/corpus/$name" "fuzz/corpus/$name" >"$OUT/logs/$name.log" 2>&1
}

pids=()
status=0
for name in "${HARNESSES[@]}"; do
  run_one "$name" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done

printf '%-18s %10s %9s %7s %7s %7s  %s\n' harness execs exec/s edges ft corpus result
for name in "${HARNESSES[@]}"; do
  log="$OUT/logs/$name.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)
  edges=$(echo "$cov" | awk '{print $2}'); ft=$(echo "$cov" | awk '{print $4}'); corp=$(echo "$cov" | awk '{print $6}')
  result=ok
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: |deadly signal|fuzz: ' "$log"; then
    result="FAILED (see $log)"
    status=1
  fi
  printf '%-18s %10s %9s %7s %7s %7s  %s\n' "$name" "${execs:-?}" "${rate:-?}" "${edges:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
if [ "$status" -ne 0 ]; then
  echo "fuzz: a harness failed; inputs are in $OUT/artifacts/, logs in $OUT/logs/" >&2
  for log in "$OUT"/logs/*.log; do
    if grep -qE 'ERROR: |runtime error:|deadly signal|fuzz: ' "$log"; then
      echo "---- $log" >&2
      grep -E -m 20 -A 12 'ERROR: |runtime error:|deadly signal|fuzz: |==[0-9]+==' "$log" | head -60 >&2
    fi
  done
fi
exit "$status"
