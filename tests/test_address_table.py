"""CPU launches through an address table (gpurl/kernels/address_table.py): the same kernel, the same results,
one array unboxed per launch instead of each of an env's own arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels.address_table import MAX_DIMS, address_table

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
