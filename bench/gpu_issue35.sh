#!/usr/bin/env bash
# Issue 35's GPU measurements in one call (a lent device's 15 minutes, start included):
#   1. bench/feedback_control.py: MPC's re-plans per second and policy training's rollouts
#      with their gradient per second against the number of scenarios, to 10^4, and each
#      program's build (the CPU tables stop at 256 / 1024);
#   2. bench/neighbouring_feedback.py on 1000 held-out reach-region targets at sigma = 0.05:
#      each target's optimum, its neighbouring gains, the quadratic law tuned for TUNE steps
#      (1000 on the CPU: 30-50 s a target there), evaluated on one unseen scenario per target
#      (the issue's "1000 held-out targets"). Its steps' sizes are not measured on a GPU yet:
#      it runs last, with the time left, and writes nothing if cut (the first two write
#      theirs before).
# Usage:  PYTHONPATH=. bash bench/gpu_issue35.sh OUTDIR [TUNE]      (a call limit of about 590 s)
set -u
out=${1:-bench/results/gpu}
tune=${2:-1000}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import jax; print('jax', jax.__version__, jax.devices())"
start=$SECONDS
. "$(dirname "$0")/_gpu_step.sh"  # step NAME LIMIT ARGS...
step mpc 100 bench/feedback_control.py --scenarios 1,256,10000 --repeats 2
step policy 100 bench/feedback_control.py --part policy --batches 1,1024,10000 --repeats 2
left=$((570 - (SECONDS - start)))
step heldout_1000 "$left" bench/neighbouring_feedback.py --tasks 1000 --sigmas 0.05 --last 9 \
    --tune "$tune"
