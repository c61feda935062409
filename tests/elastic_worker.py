"""A ``gpurl train`` worker for torchrun that kills itself once, for tests/test_torchrun_jobs.py.

    torchrun --nproc_per_node=2 --max-restarts=2 tests/elastic_worker.py --resume auto --log-dir D ...

``GPURL_TEST_KILL=RANK:ITERATION:WHERE`` makes that rank send itself SIGKILL in the first attempt of the job
(torchrun's ``TORCHELASTIC_RESTART_COUNT`` 0) only:
- ``WHERE=rollout``: in iteration ITERATION (1-based), at its third env step;
- ``WHERE=allreduce``: in iteration ITERATION, at its third all-reduce (the learner's gradients), before it
  enters the collective (its peer is then inside it, waiting);
- ``WHERE=checkpoint``: while writing the checkpoint of iteration ITERATION, after the new file's data is
  written and before it replaces ``checkpoint.pt`` (the main rank writes checkpoints: use RANK 0).
``GPURL_TEST_KILL_STAMP=PATH``: the killing rank writes the time of its kill (``time.time()``) there first.
Then the worker runs the command line as ``gpurl train`` would.
"""
from __future__ import annotations

import os
import signal
import sys
import time


def _die() -> None:
    stamp = os.environ.get("GPURL_TEST_KILL_STAMP")
    if stamp:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill(rank: int, iteration: int, where: str) -> None:
    from gpurl.envs.base import KernelEnv
    from gpurl.train import checkpoint, trainer

    state = {"iteration": 0, "steps": 0}
    iterate, step = trainer.Trainer.iterate, KernelEnv.step

    def counted_iterate(self):
        state["iteration"], state["steps"] = self.iteration + 1, 0
        return iterate(self)

    def killing_step(self, *args, **kwargs):
        state["steps"] += 1
        if where == "rollout" and state["iteration"] == iteration and state["steps"] == 3:
            _die()
        return step(self, *args, **kwargs)

    trainer.Trainer.iterate = counted_iterate
    KernelEnv.step = killing_step
    if where == "allreduce":
        from gpurl.multigpu.comm import ProcessGroupComm

        all_reduce = ProcessGroupComm.all_reduce_
        calls = {"n": 0}

        def killing_all_reduce(self, *args, **kwargs):
            if state["iteration"] == iteration:
                calls["n"] += 1
                if calls["n"] == 3:
                    _die()
            return all_reduce(self, *args, **kwargs)

        ProcessGroupComm.all_reduce_ = killing_all_reduce
    if where == "checkpoint":
        save, replace = checkpoint.save_checkpoint, os.replace

        def killing_replace(src, dst, *args, **kwargs):
            if str(dst).endswith(os.sep + checkpoint.CHECKPOINT_FILE):
                _die()
            return replace(src, dst, *args, **kwargs)

        def killing_save(path, payload, *args, **kwargs):
            if payload["iteration"] == iteration:
                os.replace = killing_replace
            return save(path, payload, *args, **kwargs)

        checkpoint.save_checkpoint = killing_save
        import gpurl.train.run as run_module
        run_module.save_checkpoint = killing_save


def main() -> None:
    spec = os.environ.get("GPURL_TEST_KILL")
    if spec and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        rank, iteration, where = spec.split(":")
        if int(os.environ.get("RANK", "0")) == int(rank):
            install_kill(int(rank), int(iteration), where)
    from gpurl.train.cli import main as cli_main

    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
