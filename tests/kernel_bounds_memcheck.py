"""Run under ``compute-sanitizer --tool memcheck`` by tests/test_gpu_kernel_bounds.py (a GPU is needed).

    python tests/kernel_bounds_memcheck.py envs [NAME,...]   # one reset and one step of each env on CUDA
    python tests/kernel_bounds_memcheck.py unchecked         # a write one past an array, the check bypassed

``envs``: every built-in env and the custom-env example (default), 2 envs each, then the example with its obs
declared two features too small, whose KernelIndexError must come before its kernel runs; prints
``STEPPED <name>`` per env, ``CAUGHT <first line>`` and ``DONE``. ``unchecked`` launches the compiled CUDA build
of tests/kernel_bounds_cases.py's ``pass_right`` directly, without the first-launch check: memcheck must
report its write past ``x`` (the control that memcheck sees such writes in these kernels). Run with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so that every torch tensor is an allocation of its own.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def step_envs(names: list[str]) -> None:
    import gymnasium

    import gpurl
    from gpurl.kernels import KernelIndexError
    from custom_env_harness import custom_env

    for name in names:
        env = gpurl.make(name, num_envs=2, device="cuda", seed=0, validate=False)
        env.reset()
        env.step(torch.zeros((2, env.num_agents, env.action_dims), dtype=env.action_dtype, device="cuda"))
        torch.cuda.synchronize()
        print("STEPPED", name, flush=True)

    class ShortObs(custom_env.Foraging):
        name = "foraging_short_obs"

        def groups(self):
            p = self.params
            return {"forager": gpurl.Group(slice(0, p.num_agents), 2 * p.num_food, gymnasium.spaces.Discrete(5))}

    env = ShortObs(num_envs=2, device="cuda")
    try:
        env.reset()
    except KernelIndexError as err:
        print("CAUGHT", str(err).splitlines()[0], flush=True)
    torch.cuda.synchronize()
    print("DONE", flush=True)


def unchecked() -> None:
    from numba import cuda

    import kernel_bounds_cases as kb
    from gpurl.kernels import EnvKernel, per_agent

    kernel = EnvKernel("memcheck_pass_right", [per_agent(kb.pass_right)], nargs=1)
    arrays = kb.declared_arrays(num_envs=2, num_agents=3)
    on_device = type(arrays)(*(cuda.to_device(a) for a in arrays))
    kernel.build("cuda")[2, 32](2, 3, on_device)  # the compiled build alone: no first-launch check
    cuda.synchronize()
    print("DONE", flush=True)


if __name__ == "__main__":
    import gpurl
    import custom_env_harness  # noqa: F401  (registers the example, "foraging")

    if sys.argv[1] == "envs":
        step_envs(sys.argv[2].split(",") if len(sys.argv) > 2 else [*gpurl.registered()])
    else:
        unchecked()
