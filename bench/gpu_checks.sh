#!/usr/bin/env bash
# The checks to run when a session is lent a GPU, as one script that fits one short lease.
#
#     OUT=/some/dir bash bench/gpu_checks.sh [SECONDS]      # SECONDS: the whole run's budget (default 540)
#
# The gpu test tier runs in the background (it is mostly single-threaded compilation; the GPU machine
# has 16 cores) while the benchmarks run one after another in the foreground, each cut at its share of
# what is left of the budget, so a slow step costs the later ones time but never the logs: every step
# writes its log under $OUT as it goes (a lease returns only what is under $OUT). Benchmarks compare
# side by side within one run (ratios), so the tier's compile work beside them shifts both sides alike.
#
# Missing Python packages travel as wheels in ./.whl (see the device notes); numba-cuda from there is
# used only when the machine's own is missing or older than gpurl's floor. What travelled on 2026-11-27
# (the 'cuda' image lacks them): gymnasium, farama-notifications, nvtx, pettingzoo, mpe2, pygame (mpe2
# imports it), jaxmarl, gymnax, and numpy 2.4.6, because numba-cuda 0.30.4 does not import under the
# image's numpy 2.5 (np.row_stack is gone).
set -u
OUT=${OUT:-/tmp/gpurl-gpu-checks}
BUDGET=${1:-540}
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

# The gpu tier, in the background.
(
    timeout --signal=INT --kill-after=10 $(( BUDGET - 30 )) \
        $PY tests/run_tiers.py --tiers gpu -v -rs --durations=25 >"$OUT/gpu_tier.log" 2>&1
    echo "== gpu tier: rc=$? in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
) &
TIER=$!

step env_throughput 100 $PY bench/env_throughput.py --device cuda --configs tag-10v100,tag-5x1000 \
    --sizes 1,100,1000,4096,16384 --repeats 3
step kernels 60 $PY bench/kernels.py --sizes 1000,100000,1000000
# The learner eager: torch.compile's first compile alone took longer than this step's share (2026-11-27).
step tag_ppo_10v100 120 $PY bench/tag_ppo.py --device cuda --preset tag-10v100 --num-envs 2000 --iters 20 \
    --learner-backend eager --log-dir runs/gpu-tag-10v100
step peers 150 $PY bench/peers.py --device cuda --peers jaxmarl --no-train --rounds 2 \
    --scenarios simple_tag,simple_spread,simple_speaker_listener --num-envs 1,256,4096,65536

wait $TIER
echo "== all done in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
cat "$OUT/summary.log"
tail -5 "$OUT/gpu_tier.log"
