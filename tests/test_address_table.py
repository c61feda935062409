"""CPU launches through an address table (gpurl/kernels/address_table.py): the same kernel, the same results,
one array unboxed per launch instead of each of an env's own arrays; the wrapper calls the kernel's compiled
overload through its address (the build's code is not compiled into it again) and refuses other types."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels import EnvKernel, per_env
from gpurl.kernels.address_table import (MAX_DIMS, address_table, native_address, table_wrapper,
                                         wrapper_signature)
from gpurl.kernels.errors import is_index_error

pytestmark = pytest.mark.cpu


def test_a_table_holds_each_arrays_address_and_shape():
    arrays = (np.zeros((4, 3), np.float32), np.zeros(4, np.uint8), np.zeros((4, 2, 5, 2), np.int64))
    table = address_table(arrays)
    assert table.dtype == np.int64 and table.shape == (3, 1 + MAX_DIMS)
    assert table[:, 0].tolist() == [a.ctypes.data for a in arrays]
    assert table[:, 1:].tolist() == [[4, 3, 0, 0], [4, 0, 0, 0], [4, 2, 5, 2]]


@pytest.mark.parametrize("arrays", [
    (np.zeros((4, 6), np.float32)[:, ::2],),                 # strided: its shape does not describe it
    (np.zeros((2, 2, 2, 2, 2), np.float32),),                # more dimensions than a row holds
    (np.zeros(3, np.float32), 3),                            # not an array
    (np.zeros((), np.float32),),                             # no dimension: no shape to rebuild
], ids=["strided", "five_dims", "scalar", "zero_dims"])
def test_arrays_a_table_cannot_describe_get_none(arrays):
    assert address_table(arrays) is None


def random_actions(env, gen: torch.Generator) -> torch.Tensor:
    high = env._action_high.view(-1)
    columns = [torch.randint(0, int(h), (env.num_envs,), generator=gen) for h in high]
    return torch.stack(columns, -1).view(env.num_envs, env.num_agents, env.action_dims)


@pytest.mark.parametrize("name", ["simple_tag", "simple_world_comm", "tag_continuous"])
def test_table_launches_equal_plain_launches_over_resets(name):
    table_env, plain_env = (gpurl.make(name, num_envs=8, seed=3, device="cpu") for _ in range(2))
    plain_env.launcher.direct.pin(None)  # no pinned arrays: every launch passes the named tuple
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(table_env.reset(), plain_env.reset())
    for t in range(40):
        actions = random_actions(table_env, gen)
        for a, b in zip(table_env.step(actions)[:4], plain_env.step(actions)[:4]):
            assert torch.equal(a, b), t
        assert torch.equal(table_env.global_state, plain_env.global_state)
        if t % 13 == 5:  # a partial reset launches through the table too
            mask = torch.arange(8) % 3 == t % 3
            assert torch.equal(table_env.reset(mask=mask), plain_env.reset(mask=mask))
    assert table_env.launcher.direct._table_entries and not plain_env.launcher.direct._table_entries
    # steps into caller buffers (a trainer's rollout slots) take the plain path: tests/test_env_step_out.py


# ---- the wrapper calls the kernel's own compiled code -------------------------------------------------

class Pair(NamedTuple):
    x: np.ndarray  # float32 [E, N]
    total: np.ndarray  # float32 [E]


def _add_to_total(e, s, scale):
    for i in range(s.x.shape[1]):
        s.total[e] += s.x[e, i] * scale[0]


def _compiled_pair_kernel(name: str):
    """(its CPU build, the overload's signature, the pinned struct, scale) after one plain launch."""
    kernel = EnvKernel(name, [per_env(_add_to_total)], nargs=2)
    pair = Pair(np.arange(12, dtype=np.float32).reshape(4, 3), np.zeros(4, np.float32))
    scale = np.ones(1, np.float32)
    kernel.launch("cpu", 4, 3, pair, scale)
    build = kernel.build("cpu")
    (signature,) = build.signatures
    return build, signature, pair, scale


def test_the_wrapper_launches_the_kernels_overload_through_its_address(monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")  # compiled here: a build loaded from the cache has no overloads
    build, signature, pair, scale = _compiled_pair_kernel("table_pair")
    wrapper = table_wrapper(None, pair, signature, "table_pair_cpu_table")
    table = address_table(pair)
    wrapper.compile(wrapper_signature(signature, table))
    (compiled,) = wrapper.overloads.values()
    scale[0] = 2
    compiled.entry_point(native_address(build.overloads[signature]), 4, 3, 1, table, scale)
    np.testing.assert_array_equal(pair.total, pair.x.sum(axis=1) * 3)  # the plain launch, then twice that
    # the kernel's code is not linked into the wrapper: its parallel body is only the build's
    assert "__numba_parfor_gufunc" in build.overloads[signature].library.get_llvm_str()
    assert "__numba_parfor_gufunc" not in compiled.library.get_llvm_str()


def test_a_wrapper_launched_with_types_not_the_overloads_does_not_compile(monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")
    build, signature, pair, scale = _compiled_pair_kernel("table_pair_types")
    wrapper = table_wrapper(None, pair, signature, "table_pair_types_cpu_table")
    float64_scale = numba.typeof(np.ones(1, np.float64))  # the overload takes a float32 one
    with pytest.raises(numba.core.errors.TypingError, match="the kernel's overload takes"):
        wrapper.compile((*wrapper_signature(signature, address_table(pair))[:-1], float64_scale))


def _gather_total(e, s, index):
    s.total[e] = s.x[e, index[0]]


def test_an_error_in_the_kernel_reaches_the_wrappers_caller_as_it_reaches_a_plain_launchs(monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", 1)  # read when the kernel compiles
    kernel = EnvKernel("table_gather", [per_env(_gather_total)], nargs=2)
    pair, index = Pair(np.ones((1, 3), np.float32), np.zeros(1, np.float32)), np.zeros(1, np.int64)
    kernel.launch("cpu", 1, 3, pair, index)
    build = kernel.build("cpu")
    (signature,) = build.signatures
    table = address_table(pair)
    wrapper = table_wrapper(None, pair, signature, "table_gather_cpu_table")
    wrapper.compile(wrapper_signature(signature, table))
    (compiled,) = wrapper.overloads.values()
    index[0] = 3  # x has 3 columns
    with pytest.raises(Exception) as through_table:
        compiled.entry_point(native_address(build.overloads[signature]), 1, 3, 1, table, index)
    with pytest.raises(Exception) as plain:  # Numba's SystemError around the parallel body's IndexError
        build.overloads[signature].entry_point(1, 3, 1, pair, index)
    assert type(through_table.value) is type(plain.value) and is_index_error(through_table.value)
