#!/usr/bin/env bash
# Issue 31's GPU measurements in one call (a lent device's 15 minutes, start included):
#   1. bench/compile_cost.py, one program per step (each with its own time limit and output
#      folder, so a step that runs out of time costs only itself): trace, lower, compile and run
#      of jaxrigid's programs beside their diffrax peers, cold and with a warm persistent cache,
#      1024 members x 1000 steps (the CPU table's sizes);
#   2. the 3x3 algebra's ensemble speed after its rewrite (issue 31): default IMIDM against
#      vmapped diffrax RK4 at 16384 members (issue 17 measured 6.73x here before it).
# Usage:  PYTHONPATH=. bash bench/gpu_issue31.sh OUTDIR      (call with a limit of about 590 s; on an H200 it took 290 s with rolling_ball cut at 80 s, which needs about 100 s)
set -u
out=${1:-bench/results/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import jax, diffrax; print('jax', jax.__version__, jax.devices(), 'diffrax', diffrax.__version__)"
. "$(dirname "$0")/_gpu_step.sh"  # step NAME LIMIT ARGS...
step forward 80 bench/compile_cost.py --programs forward
step gradient 100 bench/compile_cost.py --programs gradient
step lp_split 110 bench/compile_cost.py --programs lp_split
step throughput 60 bench/ensemble_throughput.py --sizes 16384 --steps 1000 --methods IMIDM,diffrax_RK4
step rolling_ball 150 bench/compile_cost.py --programs rolling_ball
step dla_midpoint 60 bench/compile_cost.py --programs dla_midpoint
step cli 50 bench/compile_cost.py --programs cli
