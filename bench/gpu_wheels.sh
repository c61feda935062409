#!/usr/bin/env bash
# The wheels bench/gpu_checks.sh needs on a lent GPU machine, downloaded here into ./.whl (git ignores it
# through .git/info/exclude). That machine's image (Python 3.12, torch 2.11+cu130, JAX) cannot fetch
# anything and lacks these: the env adapters' and mpe2's packages, nvtx, JaxMARL and gymnax (the JAX IPPO
# peer), TorchRL and VMAS (the collector benchmark, bench/collector.py) with what they import, and numpy
# 2.4.6 (numba-cuda 0.30.4 does not import under the image's numpy 2.5). Versions are the CPU pins of
# constraints-cpu.txt where it has one. VMAS and gym (which VMAS imports) publish sources only: built here.
#
#     bash bench/gpu_wheels.sh          # then: the device call carries .whl (run(carry=[".whl"]))
#
# It also exports gpurl at REF_COMMIT (default e2b88ac: tag_continuous observing with a thread per agent, before its team
# phase) into .whl/ref, and at BLOCK_TEAM_COMMIT (default 52b639a: the team phase with the env's whole block as one
# team, block barriers and atomic slot claims) into .whl/ref_block_team: gpu_checks.sh's side-by-side env steps
# compare this checkout against both.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude

PACKAGES=(gymnasium farama-notifications nvtx pettingzoo mpe2 pygame-ce jaxmarl gymnax numpy
          torchrl tensordict hoptorch pyvers orjson cloudpickle gym-notices pyglet six)
specs=()
for name in "${PACKAGES[@]}"; do
    pinned=$(grep -i "^${name}==" constraints-cpu.txt | head -1 || true)
    specs+=("${pinned:-$name}")
done
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
rm -rf .whl
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "${specs[@]}"
# Pure-Python packages published as sources only, built into wheels here.
for name in gym vmas; do
    pinned=$(grep -i "^${name}==" constraints-cpu.txt | head -1 || true)
    python3 -m pip wheel --quiet --no-deps -w .whl "${pinned:-$name}"
done
# The package at REF_COMMIT, for bench/env_vs_ref.py --ref-dir (the GPU machine gets no .git to export it from).
export_ref() {  # export_ref COMMIT FOLDER
    mkdir -p "$2"
    git archive "$1" gpurl | tar -x -C "$2"
    git rev-parse --short "$1" > "$2/COMMIT"
}
export_ref "${REF_COMMIT:-e2b88ac}" .whl/ref
export_ref "${BLOCK_TEAM_COMMIT:-52b639a}" .whl/ref_block_team
ls .whl
du -sh .whl
