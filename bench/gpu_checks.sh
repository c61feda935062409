#!/usr/bin/env bash
# The checks to run when a session is lent a GPU, as one script that fits one short lease.
#
#     OUT=/some/dir bash bench/gpu_checks.sh [SECONDS]      # SECONDS: the whole run's budget (default 470)
#
# The gpu test tier runs in the background (it is mostly single-threaded compilation; the GPU machine
# has 16 cores) while the benchmarks run one after another in the foreground, each cut at its share of
# what is left of the budget, so a slow step costs the later ones time but never the logs: every step
# writes its log under $OUT as it goes (a lease returns only what is under $OUT). Benchmarks compare
# side by side within one run (ratios), so the tier's compile work beside them shifts both sides alike.
#
# Missing Python packages travel as wheels in ./.whl: `bash bench/gpu_wheels.sh` downloads them here (the
# 'cuda' image lacks gymnasium, farama-notifications, nvtx, pettingzoo, mpe2, pygame-ce (mpe2 imports it),
# jaxmarl, gymnax, and numpy 2.4.6, because numba-cuda 0.30.4 does not import under the image's numpy 2.5),
# and the device call carries .whl. A numba-cuda wheel there is used only when the machine's own is missing
# or older than gpurl's floor.
set -u
OUT=${OUT:-/tmp/gpurl-gpu-checks}
BUDGET=${1:-470}
START=$(date +%s)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# JAX (the peers benchmark) would otherwise take 75% of the GPU at its first array.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export NUMBA_CACHE_DIR="$PWD/.cache/numba" TRITON_CACHE_DIR="$PWD/.cache/triton"
PY=python3

left() { echo $(( BUDGET - ($(date +%s) - START) )); }

# step NAME SECONDS CMD...: run CMD with at most SECONDS (and never past the budget), log to $OUT/NAME.log.
step() {
    local name=$1 cap=$2; shift 2
    local t; t=$(left); (( t > cap )) && t=$cap
    if (( t < 15 )); then echo "== $name: skipped, budget spent" | tee -a "$OUT/summary.log"; return; fi
    echo "== $name (at most ${t}s): $*" | tee -a "$OUT/summary.log"
    local s; s=$(date +%s)
    timeout --signal=INT --kill-after=10 "$t" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc in $(( $(date +%s) - s ))s" | tee -a "$OUT/summary.log"
    grep -h '^RESULT ' "$OUT/$name.log" >>"$OUT/summary.log" || true
}

{
    date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; nproc
} >"$OUT/machine.log" 2>&1

if [ -d .whl ]; then
    mkdir -p /tmp/site
    ls .whl/*.whl | grep -v numba_cuda | xargs $PY -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site >>"$OUT/machine.log" 2>&1
    if ! $PY - <<'EOF' >>"$OUT/machine.log" 2>&1
import sys
from importlib.metadata import version
v = tuple(int(x) for x in version("numba-cuda").split(".")[:2])
sys.exit(0 if v >= (0, 20) else 1)
EOF
    then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/numba_cuda*.whl >>"$OUT/machine.log" 2>&1
    fi
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
$PY - >>"$OUT/machine.log" 2>&1 <<'EOF'
from importlib.metadata import version
import torch
for name in ("torch", "triton", "numba", "numba-cuda", "llvmlite", "cupy-cuda13x", "jax", "gymnasium", "nvtx"):
    try:
        print(name, version(name))
    except Exception as exc:
        print(name, "missing", exc)
print("cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))
from numba import cuda
print("numba.cuda sees", cuda.gpus, cuda.get_current_device().compute_capability)
EOF

# compute-sanitizer (issue 40's memcheck over every built-in env) ships beside nvcc in the CUDA toolkit.
NVCC=$(command -v nvcc || true)
export PATH="$PATH:/usr/local/cuda/bin${NVCC:+:$(dirname "$(readlink -f "$NVCC")")}"

# The gpu tier, in the background (the memcheck tests run as a step of their own, last: they are slow).
(
    timeout --signal=INT --kill-after=10 $(( BUDGET - 30 )) \
        $PY tests/run_tiers.py --tiers gpu -v -rs --durations=25 --deselect tests/test_gpu_kernel_bounds.py \
        >"$OUT/gpu_tier.log" 2>&1
    echo "== gpu tier: rc=$? in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
) &
TIER=$!

# Issue 39 (GPU-first training), in order of what decides it:
# 1. every algorithm's steady-state iteration under set_sync_debug_mode("error"), what a graph captures, graph
#    nodes per rollout step, iteration times side by side (PPO, MAPPO, QMIX, ...): simple_tag 3v1v2, 4096 envs, T=128.
step iteration_time 110 $PY bench/iteration_time.py --device cuda --preset simple-tag --num-envs 4096 \
    --rollout-len 128 --train-groups '' --variants ppo,a2c,mappo,ppo:gru,iql,vdn,qmix --iters 3 --rounds 2
# 2. gpurl PPO vs the JAX IPPO (one jit), simple_tag 3v1v2, T=128, 4 epochs x 4 minibatches, at three sizes.
for n in 1024 4096 16384; do
    step "peers_train_$n" 75 $PY bench/peers.py --device cuda --scenarios '' --peers jaxmarl --train-envs "$n" \
        --train-rollout 128 --train-iters 8 --train-seeds 1
done
# 3. The main job as a new user runs it (tag-10v100 x 1000 envs, 100 iterations), its speed and learning.
step tag_ppo_main 130 $PY bench/tag_ppo.py --device cuda --log-dir runs/gpu-main-job
# 4. TF32 against full FP32 for the learner: the same short simple_tag run both ways.
step simple_tag_tf32 45 $PY bench/tag_ppo.py --device cuda --preset simple-tag --num-envs 4096 --iters 40 \
    --eval-episodes 512 --log-dir runs/gpu-tf32
step simple_tag_fp32 45 $PY bench/tag_ppo.py --device cuda --preset simple-tag --num-envs 4096 --iters 40 \
    --eval-episodes 512 --no-tf32 --log-dir runs/gpu-fp32
# Issue 40: compute-sanitizer --tool memcheck over a reset and a step of every built-in env and the custom-env
# example (and a control that must be flagged); what the budget leaves it, so a later session may run it alone.
step memcheck 150 $PY -m pytest -q -rs -m gpu tests/test_gpu_kernel_bounds.py

wait $TIER
echo "== all done in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
cat "$OUT/summary.log"
tail -5 "$OUT/gpu_tier.log"
