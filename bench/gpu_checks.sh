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
# A call brings back 8 files at most: the step logs come back packed in logs.tar.gz, beside summary.log and
# machine.log. A later call in the same session may run a part of it: STEPS names the steps to run (default:
# all), GPU_TIER the gpu tier's test files ("none": no tier), e.g.
#     STEPS="launch_paths peers_envs" GPU_TIER="tests/test_gpu_smoke.py" OUT=... bash bench/gpu_checks.sh 300
#
# Missing Python packages travel as wheels in ./.whl: `bash bench/gpu_wheels.sh` downloads them here (the
# 'cuda' image lacks gymnasium, farama-notifications, nvtx, pettingzoo, mpe2, pygame-ce (mpe2 imports it), TorchRL and VMAS,
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
    if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return; fi
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
for name in ("torch", "triton", "numba", "numba-cuda", "llvmlite", "cupy-cuda13x", "cuda-core", "cuda-bindings", "jax",
             "gymnasium", "nvtx", "torchrl", "tensordict", "vmas"):
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

# The gpu tier, in the background (the memcheck tests run as a step of their own, last: they are slow). BenchMARL
# is not among the wheels (it is a CPU-tier client of the TorchRL adapter), so its test module is not collected.
GPU_TIER=${GPU_TIER:-}
(
    [ "$GPU_TIER" = none ] && exit 0
    timeout --signal=INT --kill-after=10 $(( BUDGET - 30 )) \
        $PY tests/run_tiers.py --tiers gpu -v -rs --durations=25 --deselect tests/test_gpu_kernel_bounds.py \
            --ignore=tests/test_benchmarl.py $GPU_TIER \
        >"$OUT/gpu_tier.log" 2>&1
    echo "== gpu tier: rc=$? in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
) &
TIER=$!

# Issue 42 (GPU env stepping), first: what is still open there (item 3), then the items met on 2026-11-30,
# measured again.
# 3. tag-10v100 at 1000 and 4096 envs (per call, prepared): against the card's bytes bound. Then side by side
#    with the commit before tag_continuous's team phase (REF_COMMIT of bench/gpu_wheels.sh, exported into
#    .whl/ref: a thread per agent, with the counted range loops) and with its first team phase (BLOCK_TEAM_COMMIT,
#    .whl/ref_block_team: the env's block one team, one agent at a time, block barriers; this checkout: a warp a
#    team, the block's warps on different agents). The same run times this checkout's kernel under tighter launch
#    bounds too, (256, 3) and (256, 4): fewer registers a thread, so more of its env-blocks fit an SM, against the
#    spills that costs (docs/benchmarks.md has ptxas's figures). And where Nsight Compute is installed, one step's
#    profile:
#    occupancy, stalls, and the executed warp instructions and active lanes per instruction.
step tag_10v100 45 $PY bench/env_throughput.py --device cuda --configs tag-10v100 --sizes 1000,4096 --repeats 3
step tag_10v100_vs_ref 110 $PY bench/env_vs_ref.py --device cuda --ref-dir .whl/ref --configs tag-10v100 \
    --num-envs 1000,4096 --rounds 3 --also-launch-bounds 256,3 --also-launch-bounds 256,4
step tag_10v100_vs_block_team 75 $PY bench/env_vs_ref.py --device cuda --ref-dir .whl/ref_block_team \
    --configs tag-10v100 --num-envs 1000,4096 --rounds 3
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
if [ -n "$NCU" ]; then
    step tag_10v100_ncu 60 "$NCU" --kernel-name-base function --kernel-name regex:tag_continuous \
        --launch-skip 30 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
        --section InstructionStats --metrics smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio \
        $PY bench/env_throughput.py --device cuda --configs tag-10v100 --sizes 1000 --repeats 1
else
    step tag_10v100_ncu 15 echo "no ncu (Nsight Compute) on this machine: no profile"
fi
# 1. The per-call host time of env.step, prepared against the ordinary launch, side by side (host time to issue a
#    step, and synchronised): the CUDA C build (tag_gridworld.cu: prepared, against CuPy's checked launch) beside
#    its Numba build; then the Numba-built MPE envs (prepared, against numba-cuda's dispatch).
step launch_paths_cuda_c 45 $PY bench/launch_paths.py --device cuda --scenarios tag_gridworld,tag_gridworld:cuda_c \
    --num-envs 1,2000 --steps 200 --repeats 3
# The adapters' host time per step on top of env.step (Gymnasium vector, PettingZoo parallel): one wait for the
# device per step since 2026-11-30 (before: one per output).
step adapter_step 30 $PY bench/adapter_step.py --device cuda --num-envs 1,4096 --steps 500 --rounds 3
step launch_paths 70 $PY bench/launch_paths.py --device cuda --scenarios simple,simple_tag,simple_spread \
    --num-envs 1,4096,65536 --steps 200 --repeats 3
# 2. Env-steps/s against JaxMARL's jitted scan, per call and graphed, at 1, 4096 and 65536 envs.
step peers_envs 170 $PY bench/peers.py --device cuda --peers gpurl,gpurl_graph,jaxmarl --no-train --rounds 2 \
    --scenarios simple,simple_tag,simple_spread --num-envs 1,4096,65536
# 4. A TorchRL collector over gpurl's adapter against VMAS's VmasEnv in the same collector (VMAS collects
#    4096 x 100 frames in about 6 s on an H200: one batch a round keeps three rounds inside the cap).
step collector 75 $PY bench/collector.py --device cuda --num-envs 4096 --steps 100 --warmup 1 --batches 1 --rounds 3
# Issue 39 (GPU-first training): the main job as a new user runs it (tag-10v100 x 1000 envs, 100 iterations).
# Its other checks (bench/iteration_time.py, bench/peers.py training against the JAX IPPO, TF32 against FP32:
# docs/benchmarks.md, 2026-11-28) wait for a session on that issue.
step tag_ppo_main 100 $PY bench/tag_ppo.py --device cuda --log-dir runs/gpu-main-job
# Issue 45 (the Box family, first on a GPU): MASAC and MADDPG iterations with the fused Triton Box actor and the
# update as one compiled region per update; the host syncs an iteration makes (sync-debug mode) and s/iteration.
step box_family 45 $PY bench/iteration_time.py --device cuda --preset simple-spread-masac --train-groups "" \
    --variants masac,maddpg --iters 2 --rounds 2 --warmup 2 --no-count-nodes
# Issue 40: compute-sanitizer --tool memcheck over a reset and a step of every built-in env and the custom-env
# example (and a control that must be flagged); what the budget leaves it, so a later session may run it alone.
step memcheck 150 $PY -m pytest -q -rs -m gpu tests/test_gpu_kernel_bounds.py

wait $TIER
echo "== all done in $(( $(date +%s) - START ))s" >>"$OUT/summary.log"
cat "$OUT/summary.log"
tail -5 "$OUT/gpu_tier.log"
# A call brings back at most 8 files from $OUT: the step logs travel as one archive beside the summary.
( cd "$OUT" && logs=$(ls *.log | grep -v -x -e summary.log -e machine.log) \
    && tar -czf logs.tar.gz $logs && rm -f $logs )
