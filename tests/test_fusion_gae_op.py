"""gpurl.fusion.gae's dispatch on the CPU: the ``gpurl::gae`` op, ``gae(backend=...)`` and its errors.

The Triton kernel itself is checked in the sim tier (tests/test_sim_fusion_gae.py, interpreter vs
gae_ref) and the compile tier (tests/test_compile_fusion.py, sm_90 AOT).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gpurl.fusion import gae, gae_ref

pytestmark = pytest.mark.cpu


def rollout(T=6, E=3, N=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    reward = torch.randn(T, E, N, generator=g)
    value = torch.randn(T + 1, E, N, generator=g)
    final_value = torch.randn(T, E, N, generator=g)
    ended = torch.rand(T, E, generator=g) < 0.4
    truncated = ended & (torch.rand(T, E, generator=g) < 0.5)
    return reward, value, final_value, ended & ~truncated, truncated


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_cpu_backends_equal_the_reference_exactly(backend):
    args = rollout()
    want = gae_ref(*args, 0.99, 0.95)
    got = gae(*args, 0.99, 0.95, backend=backend)
    for g_, w in zip(got, want):
        assert torch.equal(g_, w)
    assert got[0].data_ptr() != got[1].data_ptr()


def test_op_is_registered_and_traces_with_fake_tensors():
    assert hasattr(torch.ops.gpurl, "gae")
    # register_fake: graph capture sees one opaque op with [T, E, N] outputs, not the Python loop.
    graph = make_fx(lambda *a: torch.ops.gpurl.gae(*a, 0.99, 0.95), tracing_mode="fake")(*rollout())
    assert "torch.ops.gpurl.gae.default" in graph.code
    assert "torch.ops.aten.where" not in graph.code


def test_triton_backend_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        gae(*rollout(), 0.99, 0.95, backend="triton")


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        gae(*rollout(), 0.99, 0.95, backend="cuda")


def test_importable_without_triton():
    # sys.modules[name] = None makes `import triton` raise ImportError, as on a machine without it.
    code = (
        "import sys; sys.modules['triton'] = None; sys.modules['triton.language'] = None\n"
        "import torch, gpurl.fusion as f\n"
        "assert f.gae_fused_kernel is None\n"
        "z = torch.zeros(2, 1, 1); no = torch.zeros(2, 1, dtype=torch.bool)\n"
        "f.gae(z, torch.zeros(3, 1, 1), z, no, no, 0.9, 0.9)\n"
        "try:\n"
        "    f.gae_triton(z, torch.zeros(3, 1, 1), z, no, no, 0.9, 0.9)\n"
        "except RuntimeError as e:\n"
        "    assert 'triton' in str(e)\n"
        "else:\n"
        "    raise AssertionError('gae_triton ran without triton')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
