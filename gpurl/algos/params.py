"""An algorithm's parameters: a typed dataclass the algorithm declares (``Algorithm.params_type``), as an env
declares ``params_type``.

:class:`AlgoParams` holds what every algorithm reads (the optimiser, the networks' shape, the policy input, the
backends); an algorithm's own dataclass extends it (:mod:`.ppo_params`, :mod:`.q_params`). Each field carries
its help text and, for a number, its allowed range beside its default (:func:`setting`); the trainer's CLI
flags are generated from these fields, and :meth:`AlgoParams.validated` is the one place they are checked.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..envs.params import RANGE, check_fields, span
from .acting import ACTING_BACKENDS

#: ``learner_backend`` values: 'compiled' (torch.compile of the loss; its backward by AOTAutograd), 'eager',
#: 'auto' (compiled)
LEARNING_BACKENDS = ("auto", "eager", "compiled")
ACTIVATIONS = ("tanh", "relu")


def setting(text: str, *, ge=None, gt=None, le=None, lt=None, **kw):
    """A parameter: its help text, its default and, for a number, its allowed range (``ge=1``: >= 1; checked by
    :func:`~gpurl.envs.params.check_fields`)."""
    metadata = {"help": text}
    if (ge, gt, le, lt) != (None, None, None, None):
        metadata[RANGE] = span(ge=ge, gt=gt, le=le, lt=lt)
    return field(metadata=metadata, **kw)


def choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


@dataclass
class AlgoParams:
    """What every algorithm reads. Subclass it for an algorithm's own parameters and name the subclass in
    ``Algorithm.params_type``; add checks between fields (or against the run's sizes) in :meth:`check`."""

    lr: float = setting("Adam learning rate", default=3e-4, gt=0)
    anneal_lr: bool = setting("anneal the learning rate linearly to 0 over the run", default=True)
    gamma: float = setting("discount", default=0.99, ge=0, le=1)
    max_grad_norm: float = setting("gradient-norm clip per group (0 disables)", default=0.5, ge=0)
    hidden: tuple = setting("MLP widths of the networks (CLI: 64,64)", default=(64, 64))
    activation: str = setting("'tanh' or 'relu'", default="tanh")
    frame_stack: int = setting("observations per policy input (the current one and frame_stack - 1 before it)",
                               default=1, ge=1)
    policy_backend: str = setting("acting: 'triton' (one fused kernel per group), 'compiled' (torch.compile of the "
                                  "torch definition), 'eager' (the torch definition as written), 'auto' (triton on "
                                  "CUDA where a kernel takes the policy: every one but the PPO family's Box heads; "
                                  "else compiled)", default="auto")
    learner_backend: str = setting("update: 'compiled' (torch.compile of the loss; its backward by AOTAutograd), "
                                   "'eager' (the loss as written, autograd), 'auto' (compiled)", default="auto")

    def validated(self, num_envs: int, rollout_len: int):
        """A checked copy (tuples normalised, derived values filled in) for a run of ``num_envs`` envs and
        ``rollout_len`` steps per iteration; ValueError names the first bad field."""
        p = dataclasses.replace(self, hidden=tuple(self.hidden))
        check_fields(p, "config")  # every number against its declared range, every flag a bool (as the run's)
        if not p.hidden or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in p.hidden):
            raise ValueError(f"hidden must be widths >= 1, got {p.hidden!r}")
        choice("activation", p.activation, ACTIVATIONS)
        choice("policy_backend", p.policy_backend, ACTING_BACKENDS)
        choice("learner_backend", p.learner_backend, LEARNING_BACKENDS)
        p.check(num_envs, rollout_len)
        return p

    def check(self, num_envs: int, rollout_len: int) -> None:
        """An algorithm's own checks of its parameters (may fill in derived values on this copy)."""

    @classmethod
    def from_dict(cls, data: dict, owner: str = "algorithm parameters"):
        """An instance of ``data`` (field name -> value); an unknown name is an error naming the valid ones."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{owner}: unknown key(s) {unknown} for {cls.__name__}; valid keys: {sorted(names)}")
        return cls(**data)


def param_fields(params_type: type) -> dict[str, dataclasses.Field]:
    """The fields of an :class:`AlgoParams` subclass by name."""
    return {f.name: f for f in dataclasses.fields(params_type)}


def default_of(f: dataclasses.Field):
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


__all__ = ["ACTIVATIONS", "AlgoParams", "LEARNING_BACKENDS", "choice", "default_of", "param_fields", "setting"]
