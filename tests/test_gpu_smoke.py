"""GPU tier: real launches on torch-owned CUDA memory (skips cleanly without a CUDA device).

Kernels get zero-copy views of torch tensors (``kernel_view``) and run on torch's current stream
(``current_stream``), so reading the result back with ``.cpu()`` on that stream needs no explicit
synchronisation; a side stream checks that launches really follow torch's stream.
"""
import numpy as np
import pytest
import torch

from gpurl.kernels.interop import current_stream, kernel_view

from toolkit_kernels import Swarm, double_kernel, rng_args, rng_kernel, rng_ref, swarm_args, swarm_kernel, swarm_ref

pytestmark = pytest.mark.gpu


def _to_device(value, device):
    """NumPy array -> torch tensor on ``device``; NumPy scalars pass through."""
    return torch.from_numpy(value).to(device) if isinstance(value, np.ndarray) else value


def _views(value):
    return kernel_view(value, "cuda") if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("num_envs, num_agents", [(3, 300), (7, 13)])  # 300 > 256: threads stride
def test_barrier_kernel_on_torch_cuda_matches_cpu(requires_cuda, num_envs, num_agents):
    device = requires_cuda
    state, weight = swarm_args(num_envs, num_agents)
    gpu_state = Swarm(*(_to_device(a, device) for a in state))
    gpu_weight = _to_device(weight, device)

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))  # the uploads above ran on the default stream
    with torch.cuda.stream(side):
        swarm_kernel.launch(
            "cuda", num_envs, num_agents,
            Swarm(*(_views(t) for t in gpu_state)), _views(gpu_weight),
            stream=current_stream(device),
        )
        got = Swarm(*(t.cpu().numpy() for t in gpu_state))

    cpu = swarm_args(num_envs, num_agents)
    swarm_kernel.launch("cpu", num_envs, num_agents, *cpu)
    want = swarm_ref(num_envs, num_agents)
    for name, g, c, w in zip(Swarm._fields, got, cpu[0], want):
        np.testing.assert_array_equal(g, w, err_msg=name)  # integer-valued floats: exact everywhere
        np.testing.assert_array_equal(g, c, err_msg=name)


def test_plain_kernel_writes_torch_memory_in_place(requires_cuda):
    x = torch.arange(12, dtype=torch.float32, device=requires_cuda).reshape(3, 4)
    double_kernel.launch("cuda", 3, 4, kernel_view(x, "cuda"), stream=current_stream(x.device))
    torch.testing.assert_close(x.cpu(), 2 * torch.arange(12, dtype=torch.float32).reshape(3, 4))


def test_rng_on_gpu_matches_references_exactly(requires_cuda):
    shape = dict(num_envs=3, num_agents=300, streams=4)
    seed, counter, *outs = rng_args(**shape, seed=2**64 - 5, counter=99)
    gpu_outs = [_to_device(a, requires_cuda) for a in outs]
    rng_kernel.launch(
        "cuda", shape["num_envs"], shape["num_agents"], seed, counter, *(_views(t) for t in gpu_outs),
        stream=current_stream(requires_cuda),
    )
    for got, want in zip(gpu_outs, rng_ref(**shape, seed=2**64 - 5, counter=99)):
        np.testing.assert_array_equal(got.cpu().numpy(), want)
