#!/usr/bin/env bash
# benchmarks/gpu_run.sh — everything the GPU machine is for, in one command (shared/GPU.md):
# configure and build with the GPU tests, run them, run them again under compute-sanitizer
# (memcheck and racecheck, on the small cases), and run the benchmarks. Logs and JSON go to
# $OUT (or ./out); the last thing printed is a short summary. The test shards need Catch2 3. Each step has a time limit, so
# the whole run fits a short lease.
#   usage: [PARSCAN_COMMIT=<hash>] bash benchmarks/gpu_run.sh [--skip-tests] [--skip-bench] [--skip-sanitizer] [--quick-bench]
# (a second call on a still-warm machine reuses the build, so the tests and the sanitizers can
# run in separate calls).
# Then, back here: python3 benchmarks/report.py --commit <hash> <the returned bench_*.json>.
set -uo pipefail
out=${OUT:-$PWD/out}
mkdir -p "$out"
build=${PARSCAN_GPU_BUILD:-/tmp/parscan-gpu}
skip_bench=0 skip_san=0 skip_tests=0 quick=""
for a in "$@"; do
  case $a in
    --skip-bench) skip_bench=1 ;;
    --skip-tests) skip_tests=1 ;;
    --skip-sanitizer) skip_san=1 ;;
    --quick-bench) quick=--quick ;;
  esac
done
summary=()
step() {  # name, command...: runs, records pass/fail and the wall time
  local name=$1; shift
  local t0=$SECONDS
  if "$@"; then summary+=("PASS  $name ($((SECONDS - t0)) s)"); else summary+=("FAIL  $name ($((SECONDS - t0)) s)"); fi
}
prefix=""
for d in /usr/local/cuda/targets/x86_64-linux/lib/cmake /usr/local/cuda/lib64/cmake; do
  [ -d "$d" ] && prefix="$prefix;$d"
done
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
step configure cmake -S . -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="${prefix#;}" -DPARSCAN_GPU_TESTS=ON -DPARSCAN_BUILD_BENCHMARKS=ON
step build bash -c "cmake --build '$build' -j $(nproc) --target parscan_gpu_tests bench_scan bench_recurrence bench_varlen bench_tuning bench_matrix bench_call bench_host > '$out/build.txt' 2>&1 || { tail -50 '$out/build.txt'; exit 1; }"
gpu_tests=$build/test/parscan_gpu_tests
# The whole suite, in parallel shards (its float64 host references are CPU-bound; the GPU is
# shared). Each shard's log goes into one file; the failures are printed.
shards=${PARSCAN_GPU_TEST_SHARDS:-16}
run_shards() {
  local pids=() rc=0 i
  for ((i = 0; i < shards; i++)); do
    timeout "${PARSCAN_GPU_TEST_TIMEOUT:-420}" "$gpu_tests" --shard-count "$shards" --shard-index "$i" "$@" \
      > "/tmp/gpu_shard_$i.txt" 2>&1 & pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { rc=1; echo "shard $i failed (exit $?)"; }; done
  cat /tmp/gpu_shard_*.txt > "$out/gpu_tests.txt"
  grep -hE "^(test cases|All tests passed)" /tmp/gpu_shard_*.txt
  [ $rc = 0 ] || grep -hB3 -A12 -E "FAILED|timeout|error" /tmp/gpu_shard_*.txt | head -120
  return $rc
}
[ $skip_tests = 0 ] && step gpu-tests run_shards
if [ $skip_san = 0 ]; then
  # Small cases under each tool: every kernel kind (warp loop, chained tiles, lane tiles, bulk tiles,
  # the chain levels on cuBLAS), forward and backward, carries and reverse, iterators, varlen, graph capture. One process per
  # case, all at once, each with its own time limit (racecheck of [varlen] alone needed more than
  # 250 s on an H100, 2026-11-25): run as one process, racecheck ran out of
  # 150 s and of 170 s before its last case on an H100 (2026-11-25). PARSCAN_SANITIZER_CASES: a
  # '|'-separated list of Catch2 test specs instead.
  default_cases='cuda: generic scans: batches in every layout in both directions with carries|cuda: recurrence backward: every option x every layout <float>|cuda: recurrence chunked forward and backward equal one call <float>|cuda: log recurrence: chunks chained through x_final equal one call|cuda: log recurrence backward: chunks chained through dlog_x_final = dlog_x0 equal one call|cuda: matrix recurrence: chunked forward and backward equal one call <float>|cuda: recurrence forward: lengths off 16-byte multiples and sequences off alignment <float>|cuda: recurrence backward: lengths off 16-byte multiples and sequences off alignment <float>|cuda: log recurrence value forms: chunks across forms equal one call forward and backward|cuda: matrix recurrence: engine edges (N and T and B around chunks and stages and tasks per warp) <float>|cuda: recurrence forward: channel-last lane packs with even and odd D and misaligned pointers <bfloat16>|cuda: recurrence backward: channel-last lane packs with even and odd D and misaligned pointers <bfloat16>|cuda: chained tiles: generic int32 scans through the staged window chain|cuda: graph capture: generic scans of one long sequence|cuda: graph capture: generic scans of one long affine sequence (cooperative launch)|cuda: iterator scans: fancy iterators in every layout in both directions with carries|cuda: iterator scans: device_vector iterators and device_ptr run as raw pointers|cuda: matrix chain: wide totals on cuBLAS for float (batches and strided views) <float>|cuda: graph capture: matrix chain totals and prefixes|[varlen]|[segmented]|[bulk]~[large]'
  IFS='|' read -r -a cases <<<"${PARSCAN_SANITIZER_CASES:-$default_cases}"
  run_sanitizer() {  # tool: every case in its own process, side by side
    local tool=$1 pids=() rc=0 i
    for i in "${!cases[@]}"; do
      # PARSCAN_TEST_SMALL: without the GPU-only long shapes (the tools slow kernels a hundredfold).
      PARSCAN_TEST_SMALL=1 timeout "${PARSCAN_SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$gpu_tests" "${cases[$i]}" > "/tmp/sanitizer_${tool}_$i.txt" 2>&1 & pids+=($!)
    done
    for i in "${!pids[@]}"; do
      wait "${pids[$i]}"
      local st=$?  # 124: out of time
      [ $st = 0 ] || { rc=1; echo "$tool: ${cases[$i]}: exit $st"; tail -20 "/tmp/sanitizer_${tool}_$i.txt"; }
    done
    cat /tmp/sanitizer_"${tool}"_*.txt > "$out/sanitizer_$tool.txt"
    return $rc
  }
  for tool in memcheck racecheck; do step "sanitizer-$tool" run_sanitizer "$tool"; done
fi
if [ $skip_bench = 0 ]; then
  # The GPU machine's copy of the tree has no git metadata: pass PARSCAN_COMMIT=<hash> from here.
  export PARSCAN_COMMIT=${PARSCAN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  step bench_scan timeout 60 "$build/benchmarks/bench_scan" $quick --json "$out/bench_scan.json"
  step bench_recurrence timeout 240 "$build/benchmarks/bench_recurrence" $quick --json "$out/bench_recurrence.json"
  step bench_varlen timeout 120 "$build/benchmarks/bench_varlen" --json "$out/bench_varlen.json"
  step bench_matrix timeout 150 "$build/benchmarks/bench_matrix" $quick --json "$out/bench_matrix.json"
  # What a tiny call costs the host (bench_python --tiny --cpp bench_call.json compares with it).
  step bench_call timeout 60 "$build/benchmarks/bench_call" --json "$out/bench_call.json"
  # The host backend on one core and on all of them (the GPU machine has 16).
  step bench_host timeout 120 "$build/benchmarks/bench_host" $quick --json "$out/bench_host.json"
  [ "${PARSCAN_TUNING:-1}" = 1 ] && step bench_tuning timeout 120 "$build/benchmarks/bench_tuning" --json "$out/bench_tuning.json"
fi
echo
nvidia-smi -L 2>/dev/null
printf '%s\n' "${summary[@]}"
printf '%s\n' "${summary[@]}" | grep -q FAIL && exit 1
exit 0
