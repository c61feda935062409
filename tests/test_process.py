"""The entry point's process settings (gpurl/train/process.py): glibc's mmap threshold is raised, so a
freed large block is reused, not unmapped; the compile cache has a home; constructors change nothing."""
import os
import sys

import pytest
import torch

from gpurl.train.process import compile_cache_dir, keep_freed_memory

pytestmark = pytest.mark.cpu


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt: Linux only")
def test_large_blocks_come_from_the_heap_after_it():
    import ctypes

    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    # glibc marks a chunk it mmapped by itself with IS_MMAPPED (0x2) in the size word just before the
    # block; a block carved from the arena has it clear. (The address alone does not tell: where brk cannot
    # grow, glibc extends the arena with an mmapped region, whose first block is page-aligned plus 16 too.)
    is_mmapped = 0x2
    blocks = [libc.malloc(8 << 20) for _ in range(3)]
    try:
        size_words = [ctypes.c_size_t.from_address(b - ctypes.sizeof(ctypes.c_size_t)).value for b in blocks]
        assert all(w >= 8 << 20 for w in size_words), [hex(w) for w in size_words]  # the size word, read right
        assert not any(w & is_mmapped for w in size_words), [(hex(b), hex(w)) for b, w in zip(blocks, size_words)]
    finally:
        for b in blocks:
            libc.free(b)


def test_compile_cache_dir_defaults_under_the_users_cache_and_respects_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache_dir() == tmp_path / "gpurl" / "inductor"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "gpurl" / "inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert compile_cache_dir() == tmp_path / "mine"


def test_a_trainer_changes_no_process_setting(monkeypatch):
    """Threads, the allocator and the global RNG are the entry point's: building and running a Trainer
    calls none of their setters and leaves the global RNG where it was."""
    from gpurl.train import Trainer, build_config, process

    calls = []
    for owner, name in ((torch, "set_num_threads"), (torch, "manual_seed"), (torch, "seed"),
                        (process, "keep_freed_memory"), (process, "configure_process")):
        monkeypatch.setattr(owner, name, lambda *a, _name=name, **k: calls.append(_name))
    rng = torch.get_rng_state()
    cfg = build_config(env="tag_gridworld", env_params=dict(num_taggers=2, grid_length=6, episode_length=5),
                       num_envs=2, rollout_len=3, iters=1, eval_episodes=0, device="cpu", torch_threads=1,
                       policy_backend="eager", learner_backend="eager")
    Trainer(cfg).iterate()
    assert calls == []
    assert torch.equal(torch.get_rng_state(), rng)
