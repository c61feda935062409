"""Adam on one flat parameter, written once in torch as a function of device tensors.

The learning rate and the step count are device tensors, so an update reads nothing from the host and
can be compiled together with the loss and captured in a CUDA graph (:mod:`.update_step`). The math is
``torch.optim.Adam``'s (no weight decay, no AMSGrad):

    m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2;   k = k + 1
    p -= lr / (1 - beta1^k) * m / (sqrt(v) / sqrt(1 - beta2^k) + eps)

and :meth:`FlatAdam.state_dict` is ``torch.optim.Adam``'s format for a single parameter, so checkpoints
of either load into the other.
"""
from __future__ import annotations

import torch

#: Adam's constants (beta1, beta2), as torch.optim.Adam's defaults
BETAS = (0.9, 0.999)


def adam_update_(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                 step: torch.Tensor, lr: torch.Tensor, eps: float, betas: tuple[float, float] = BETAS) -> None:
    """One Adam step in place: ``param``, ``grad``, ``exp_avg``, ``exp_avg_sq`` float32 [P]; ``step``
    float32 [] (the steps taken, incremented here); ``lr`` float32 [1] (this step's learning rate)."""
    beta1, beta2 = betas
    step.add_(1.0)
    exp_avg.lerp_(grad, 1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    step_size = lr / (1.0 - torch.pow(beta1, step))
    root_correction = torch.sqrt(1.0 - torch.pow(beta2, step))
    param.sub_(step_size * exp_avg / (exp_avg_sq.sqrt() / root_correction + eps))


def annealed_lr(lr: float, iteration, iters: int, anneal: bool):
    """The learning rate of the update after ``iteration`` iterations (an int, or an int64 device tensor:
    the schedule then stays on the device): linear from ``lr`` to 0 over ``iters`` when ``anneal``."""
    return lr * (1.0 - iteration / iters) if anneal else lr + 0 * iteration


class FlatAdam:
    """The state of Adam over one flat parameter ``param`` (float32 [P]), or over its ``span`` ``(start,
    stop)`` (an algorithm whose networks step at different rates or learning rates keeps one FlatAdam per
    span of the same flat parameter): moments, step count and the learning rate, device tensors allocated
    once (an update and a CUDA graph keep their addresses: loading a checkpoint copies into them).
    ``param`` is then the span's view."""

    def __init__(self, param: torch.Tensor, lr: float, eps: float = 1e-5, betas: tuple[float, float] = BETAS,
                 span: tuple[int, int] | None = None):
        self.span = (0, param.numel()) if span is None else span
        param = param[self.span[0]:self.span[1]]
        self.param, self.eps, self.betas, self.base_lr = param, eps, betas, lr
        f32 = dict(dtype=torch.float32, device=param.device)
        self.exp_avg = torch.zeros_like(param, memory_format=torch.contiguous_format).detach()
        self.exp_avg_sq = torch.zeros_like(self.exp_avg)
        self.step = torch.zeros((), **f32)
        #: float32 [1]: the learning rate of the next step (a schedule writes it on the device)
        self.lr = torch.full((1,), lr, **f32)

    def state_dict(self) -> dict:
        """``torch.optim.Adam([param], lr, eps=eps).state_dict()``'s layout (tensors shared, not copied)."""
        group = {"lr": self.base_lr, "betas": self.betas, "eps": self.eps, "weight_decay": 0, "amsgrad": False,
                 "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                 "fused": True, "decoupled_weight_decay": False, "params": [0]}
        return {"state": {0: {"step": self.step, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}},
                "param_groups": [group]}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """Copy a :meth:`state_dict` (or a one-parameter ``torch.optim.Adam`` one) into this state; checked
        whole before anything changes."""
        try:
            saved = state["state"]
            moments = saved[0] if saved else None
            groups = state["param_groups"]
        except (KeyError, TypeError) as err:
            raise ValueError(f"optimizer state: not an Adam state dict ({type(err).__name__}: {err})") from None
        if len(groups) != 1 or groups[0].get("params") != [0]:
            raise ValueError(f"optimizer state: expected one parameter group of one flat parameter, got "
                             f"{[g.get('params') for g in groups]}")
        if moments is not None:
            for name in ("exp_avg", "exp_avg_sq"):
                t = moments.get(name)
                if not isinstance(t, torch.Tensor) or t.shape != self.exp_avg.shape:
                    raise ValueError(f"optimizer state: {name} is {None if t is None else tuple(t.shape)}, "
                                     f"the flat parameter has {tuple(self.exp_avg.shape)} values")
        if moments is None:  # an optimizer that never stepped
            self.exp_avg.zero_()
            self.exp_avg_sq.zero_()
            self.step.zero_()
        else:
            self.exp_avg.copy_(moments["exp_avg"])
            self.exp_avg_sq.copy_(moments["exp_avg_sq"])
            self.step.copy_(torch.as_tensor(moments["step"], dtype=torch.float32).reshape(()))


def flat_adam_state(state: dict) -> dict:
    """A ``torch.optim.Adam`` state dict of one parameter group over several parameters as the one-flat-parameter
    layout (:meth:`FlatAdam.state_dict`): each moment the parameters' moments flattened and concatenated in the
    group's order (the flat parameter's, when it was built from the same networks); one whose parameters did not
    all step together is refused."""
    try:
        groups, saved = state["param_groups"], state["state"]
        indices = [i for group in groups for i in group["params"]]
    except (KeyError, TypeError) as err:
        raise ValueError(f"optimizer state: not an Adam state dict ({type(err).__name__}: {err})") from None
    group = {**groups[0], "params": [0]}
    if not saved:
        return {"state": {}, "param_groups": [group]}
    missing = [i for i in indices if i not in saved]
    steps = {float(saved[i]["step"]) for i in indices if i in saved}
    if missing or len(steps) != 1:
        raise ValueError(f"optimizer state: parameters {missing} have no moments, or they took different step "
                         f"counts {sorted(steps)}: not one flat Adam's")
    flat = {name: torch.cat([saved[i][name].reshape(-1) for i in indices]) for name in ("exp_avg", "exp_avg_sq")}
    return {"state": {0: {"step": torch.tensor(steps.pop()), **flat}}, "param_groups": [group]}


__all__ = ["BETAS", "FlatAdam", "adam_update_", "annealed_lr", "flat_adam_state"]
