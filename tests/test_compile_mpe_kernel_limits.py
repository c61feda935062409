"""Compile tier: every MPE scenario's env kernels at mpe2's defaults x 4096 envs fit the H100's per-block
limits, do not spill, hold no float64 and no machine-code form ptxas has been seen to compile wrongly: the
checks of tests/test_compile_kernel_limits.py (whose docstring says how), for the MPE configurations, in a
file of their own so that a pytest-xdist worker takes them beside that file's."""
from __future__ import annotations

import pytest
from kernel_limits import MPE_CONFIGS, env_kernel_problems, suspect_machine_code

pytestmark = pytest.mark.compile


@pytest.mark.parametrize("config", MPE_CONFIGS)
def test_env_kernels_fit_the_block_and_do_not_spill(config, ptxas):
    assert env_kernel_problems(config, ptxas) == []


@pytest.mark.parametrize("config", MPE_CONFIGS)
def test_env_kernels_hold_no_machine_code_form_ptxas_got_wrong(config, ptxas, cuobjdump):
    assert suspect_machine_code(config, ptxas, cuobjdump) == {}
