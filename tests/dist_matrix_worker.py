"""One rank of the algorithm x distribution-policy matrix (tests/test_algo_dist_matrix.py): trains every
variant named on the command line, one after another, in this torchrun launch (one process start per
policy instead of one per variant), each into its own log dir, and prints one ``VARIANT {json}`` line
per variant on the main rank.

    torchrun --nproc_per_node=2 tests/dist_matrix_worker.py DIST LOG_ROOT ppo:none mappo:gru ...
"""
from __future__ import annotations

import json
import sys

import torch.distributed as dist

import reinforce_algo  # noqa: F401  (registers --algo reinforce: an algorithm from outside gpurl joins the matrix)
from dist_helpers import CONTINUOUS_ARGS, TINY_ARGS, VALUE_ARGS
from gpurl.algos import ALGORITHMS
from gpurl.algos.params import param_fields
from gpurl.train.config import RUN_FIELDS
from gpurl.train.cli import config_from_args
from gpurl.train.launch import run

ITERS = 2


def reads(algo: str, flag: str) -> bool:
    """``flag`` (``--name``, ``--no-name``) sets a run field or a parameter of ``algo``."""
    name = flag.removeprefix("--").removeprefix("no-").replace("-", "_")
    return name in RUN_FIELDS or name in param_fields(ALGORITHMS[algo].params_type) or name == "env_param"


def variant_args(algo: str, recurrent: str) -> list[str]:
    """The shared tiny run's flags that ``algo`` reads (a value for a parameter it does not read is refused)."""
    cls = ALGORITHMS[algo]
    base = CONTINUOUS_ARGS if getattr(cls, "box_actions_only", False) else VALUE_ARGS if cls.uses_replay else TINY_ARGS
    args, k = [], 0
    while k < len(base):
        takes_value = k + 1 < len(base) and not base[k + 1].startswith("--")
        if reads(algo, base[k]):
            args += base[k:k + 1 + takes_value]
        k += 1 + takes_value
    if algo == "a2c":  # A2C's own defaults: one epoch, one minibatch
        args = [*args, "--epochs", "1", "--minibatches", "1"]  # argparse: the last value of a flag wins
    if recurrent != "none":
        args += ["--recurrent", recurrent]
    return [*args, "--algo", algo, "--iters", str(ITERS)]


def keep_one_process_group() -> None:
    """Every variant's run inits and destroys the process group; here the first init stays for all of
    them. A second init in the same torchrun store would reuse the first group's keys (the group count
    restarts at 0 after a destroy) and read the old peer addresses."""
    init = dist.init_process_group

    def init_once(*args, **kwargs):
        if not dist.is_initialized():
            init(*args, **kwargs)

    dist.init_process_group = init_once
    dist.destroy_process_group = lambda *args, **kwargs: None


def main(policy: str, root: str, variants: list[str]) -> None:
    keep_one_process_group()
    extra = ["--replication-check-every", "1"] if policy == "data_parallel" else ["--max-staleness", "0"]
    for variant in variants:
        algo, recurrent = variant.split(":")
        cfg = config_from_args([*variant_args(algo, recurrent), "--dist", policy, *extra,
                                "--log-dir", f"{root}/{algo}-{recurrent}"])
        result = run(cfg, say=lambda *args, **kwargs: None)
        if result is not None:
            print("VARIANT " + json.dumps({"variant": variant, **result}, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
