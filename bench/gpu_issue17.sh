#!/usr/bin/env bash
# Issue 17's GPU measurements in one call (a lent device's 15 minutes, start included):
#   1. ensemble throughput at 10⁶ members, float64 then float32: the default IMIDM, DMV-body
#      and LP-split:kahan-li8 against vmapped diffrax RK4 (same run, same Δt = 0.01);
#   2. work–precision of the free body at 10⁴ members, t = 100 and 10³ (a subset of methods,
#      long calls over 4 s skipped: every method, or t = 10⁴, would not fit);
#   3. throughput at 16384 members, float64 (the fast-default target's ensemble).
# Each step has its own time limit and writes its own JSON, so a step that runs out of time
# costs only itself. On an H200 (2026-11-28) the steps took 71, 56, 179 and 50 s (plus ≈ 10 s
# of imports each); call with a limit of ≈ 560 s.   Usage:  PYTHONPATH=. bash bench/gpu_issue17.sh OUTDIR
set -u
out=${1:-bench/results/gpu}
mkdir -p "$out"/f64 "$out"/f32 "$out"/wp "$out"/f64_16k
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
M=IMIDM,DMV-body,LP-split:kahan-li8,diffrax_RK4
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 110 $PY bench/ensemble_throughput.py --sizes 1000000 --steps 200 --methods $M \
    --out "$out"/f64 || echo "step 1 float64: exit $?"
timeout 90 $PY bench/ensemble_throughput.py --sizes 1000000 --steps 200 --methods $M \
    --dtype float32 --out "$out"/f32 || echo "step 1 float32: exit $?"
timeout 240 $PY bench/work_precision.py --members 10000 --problems free \
    --methods LP-split:yoshida6,LP-split:kahan-li8,IMIDM,diffrax_Dopri8,diffrax_RK4 \
    --t-long 1000 --repeats 1 --repeats-long 1 --max-long-seconds 4 --out "$out"/wp \
    || echo "step 2: exit $?"
timeout 80 $PY bench/ensemble_throughput.py --sizes 16384 --steps 1000 --methods $M \
    --out "$out"/f64_16k || echo "step 3: exit $?"
