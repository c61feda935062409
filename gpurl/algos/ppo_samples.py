"""What a PPO update reads, laid out once per iteration and shuffled once per epoch, in buffers allocated
once (a CUDA graph keeps their addresses).

Per trained group, :meth:`PPOSamples.pack` writes every sample's columns side by side into one float32
matrix (the normalised policy input, the action, log-prob, advantage, return and value; a recurrent
group's episode-start flag), so an epoch's shuffle is one gather of whole rows; a central critic's env
rows (global state, returns, values) get a matrix of their own. :meth:`PPOSamples.shuffle` draws the
epoch's order on the device (:mod:`gpurl.multigpu.minibatches`) and gathers every matrix into minibatch order,
[M, R, F]:
minibatch m is row block m, which the objective (:mod:`.ppo_objective`) selects with a device index.
It also sums each minibatch's advantages for their normalisation (float64 [M, 2], summed over ranks by
the caller).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..envs.memory import require_memory
from ..multigpu.minibatches import LearnerBatches
from .ppo_loss import advantage_sums

#: Columns after a sample's policy input and action: log-prob, advantage, return, value (, start).
LOG_PROB, ADVANTAGE, RETURN, VALUE, START = range(5)


@dataclass
class GroupColumns:
    """Where a group's fields sit in its packed rows: input [0, inputs), action [inputs, inputs + actions),
    then LOG_PROB.. at ``inputs + actions + k``; ``inputs`` = ``obs_dim`` x frames."""

    obs_dim: int
    inputs: int
    actions: int
    categorical: bool
    agents: int
    recurrent: bool

    @property
    def width(self) -> int:
        return self.inputs + self.actions + (5 if self.recurrent else 4)

    def column(self, k: int) -> int:
        return self.inputs + self.actions + k


def samples_bytes(groups: dict, steps: int, num_envs: int, minibatches: int, state_dim: int, hidden: int) -> int:
    """Bytes :class:`PPOSamples` allocates for these sizes (checked before allocating): each group's packed and
    epoch rows (and a recurrent group's states), its layout's int64 indices, and its critic's rows."""
    T, E, M = steps, num_envs, minibatches
    total = 0
    for _, cols in groups.values():
        n = cols.agents
        if cols.recurrent:
            B = math.ceil(E / M)
            total += 4 * (T * E * n + T * M * B * n) * cols.width + 4 * (E * n + M * B * n) * hidden
            critic_rows = M * T * B
        else:
            L = math.ceil(T * n / M) * M
            total += 4 * (T * E * n + E * L) * cols.width + 17 * E * L  # rows, padded epoch; layout ids, rows, flags
            critic_rows = E * math.ceil(T / M) * M
        if state_dim:
            total += 4 * (T * E + critic_rows) * (state_dim + 2 * n) + 17 * critic_rows
    return total


class PPOSamples:
    """The packed and shuffled samples of every trained group (and its central critic, ``state_dim`` > 0).

    ``groups``: name -> (agents slice, :class:`GroupColumns`); T steps of the E envs whose samples this learner
    holds (``batches.num_envs``; ``batches`` lays out the global minibatches and this learner's share of
    them); M = ``minibatches``.
    """

    def __init__(self, groups: dict, steps: int, batches: LearnerBatches, minibatches: int, state_dim: int,
                 hidden: int, device: torch.device):
        T, E, M = steps, batches.num_envs, minibatches
        require_memory(samples_bytes(groups, T, E, M, state_dim, hidden), device,
                       f"the learner's sample buffers of num_envs={E} x rollout_len={T} steps", "lower num_envs "
                       "(--num-envs) or rollout_len (--rollout-len)")
        self.groups, self.steps, self.minibatches, self.state_dim = groups, T, M, state_dim
        f32 = dict(dtype=torch.float32, device=device)
        self.packed, self.epoch, self.layouts, self.sums = {}, {}, {}, {}
        self.critic_packed, self.critic_epoch, self.critic_layouts = {}, {}, {}
        self.hidden0, self.hidden_epoch = {}, {}
        self.weight, self.critic_weight, self.counts, self.value_counts = {}, {}, {}, {}
        for g, (name, (agents, cols)) in enumerate(groups.items()):
            n = cols.agents
            if cols.recurrent:
                blocks = batches.env_blocks(M, 3000 + g, device)
                B = blocks.weight.shape[1]
                self.layouts[name] = blocks
                self.packed[name] = torch.zeros(T, E * n, cols.width, **f32)
                self.epoch[name] = torch.zeros(T, M, B * n, cols.width, **f32)
                self.hidden0[name] = torch.zeros(E * n, hidden, **f32)
                self.hidden_epoch[name] = torch.zeros(M, B * n, hidden, **f32)
                self.weight[name] = blocks.weight.repeat_interleave(n, 1)
                envs = torch.tensor(blocks.counts, **f32)
                self.counts[name] = envs * (T * n)
                self.value_counts[name] = envs * (T * n)
                if state_dim:
                    self.critic_weight[name] = blocks.weight[:, None, :].expand(M, T, B).reshape(M, T * B)
            else:
                samples = batches.stratified(T, n, M, 1000 + g, device)
                self.layouts[name] = samples
                self.packed[name] = torch.zeros(T * E * n, cols.width, **f32)
                self.epoch[name] = torch.zeros(M, E * samples.chunk, cols.width, **f32)
                self.weight[name] = samples.weight
                self.counts[name] = torch.tensor(samples.counts, **f32)
                self.value_counts[name] = self.counts[name]
                if state_dim:
                    rows = batches.stratified(T, 1, M, 2000 + g, device)
                    self.critic_layouts[name] = rows
                    self.critic_weight[name] = rows.weight
                    self.value_counts[name] = torch.tensor(rows.counts, **f32) * n
            self.sums[name] = torch.zeros(M, 2, dtype=torch.float64, device=device)
            if state_dim:
                self.critic_packed[name] = torch.zeros(T * E, state_dim + 2 * n, **f32)
                self.critic_epoch[name] = torch.zeros(M, self.critic_weight[name].shape[1], state_dim + 2 * n, **f32)

    # ---- once per iteration ----------------------------------------------------------------------------

    @torch.no_grad()
    def pack(self, s, advantages: torch.Tensor, returns: torch.Tensor, nets, value_norms=None) -> None:
        """Every group's samples of storage ``s`` into its packed rows: inputs normalised by its policy's
        current statistics (fixed during the update), advantages and returns [T, E, N]; with central critics,
        their rows, returns and values normalised by ``value_norms[name]`` where given."""
        T = self.steps
        for name, (a, cols) in self.groups.items():
            group_inputs = s.policy_input(0, T, a, cols.obs_dim)
            E, n = group_inputs.shape[1:3]
            inputs = nets[name].normalize(group_inputs)
            fields = [inputs, s.actions[:, :, a].to(torch.float32), s.log_prob[:, :, a, None],
                      advantages[:, :, a, None], returns[:, :, a, None], s.value[:T, :, a, None]]
            if cols.recurrent:
                starts = s.starts[s.history:s.history + T, :, None, None].expand(T, E, n, 1).to(torch.float32)
                torch.cat([*fields, starts], -1, out=self.packed[name].view(T, E, n, -1))
                self.hidden0[name].copy_(s.hidden[0, :, a].reshape(E * n, -1))
            else:
                torch.cat(fields, -1, out=self.packed[name].view(T, E, n, -1))
            if self.state_dim:
                norm = None if value_norms is None else value_norms[name]
                ret, old = returns[:, :, a], s.value[:T, :, a]
                if norm is not None:
                    ret, old = norm.normalize(ret), norm.normalize(old)
                torch.cat([s.global_state[:T], ret, old], -1, out=self.critic_packed[name].view(T, E, -1))

    # ---- once per epoch ----------------------------------------------------------------------------------

    @torch.no_grad()
    def shuffle(self, seed: torch.Tensor, draw: torch.Tensor) -> None:
        """This epoch's minibatches (draw number ``draw`` int64 [1]) into the epoch buffers, and each
        minibatch's advantage sums (this rank's) into ``sums``."""
        T, M = self.steps, self.minibatches
        for name, (_, cols) in self.groups.items():
            order = self.layouts[name].order(seed, draw)
            if cols.recurrent:
                n = cols.agents
                envs = order                                                      # [M, B]
                rows = (envs[..., None] * n + torch.arange(n, device=envs.device)).reshape(-1)
                torch.index_select(self.packed[name], 1, rows, out=self.epoch[name].view(T, -1, cols.width))
                torch.index_select(self.hidden0[name], 0, rows, out=self.hidden_epoch[name].view(len(rows), -1))
                adv = self.epoch[name][..., cols.column(ADVANTAGE)].permute(1, 0, 2)    # [M, T, B n]
                weight = self.weight[name][:, None, :]
                self.sums[name].copy_(advantage_sums(adv.reshape(M, -1), weight.expand_as(adv).reshape(M, -1)))
                if self.state_dim:
                    E = self.packed[name].shape[1] // n
                    critic_rows = (torch.arange(T, device=envs.device)[None, :, None] * E + envs[:, None, :])
                    self._gather_critic(name, critic_rows.reshape(-1))
            else:
                torch.index_select(self.packed[name], 0, order, out=self.epoch[name].view(len(order), -1))
                adv = self.epoch[name][..., cols.column(ADVANTAGE)]
                self.sums[name].copy_(advantage_sums(adv, self.weight[name]))
                if self.state_dim:
                    self._gather_critic(name, self.critic_layouts[name].order(seed, draw))

    def _gather_critic(self, name: str, rows: torch.Tensor) -> None:
        buffer = self.critic_epoch[name]
        torch.index_select(self.critic_packed[name], 0, rows, out=buffer.view(len(rows), -1))

    # ---- what the objective reads ------------------------------------------------------------------------

    def group_inputs(self, name: str, moments: torch.Tensor) -> tuple:
        """The tensors :class:`~.ppo_objective.PPOObjective` reads of group ``name``: epoch rows, weights,
        sample counts, ``moments`` (float32 [M, 2]: each minibatch's advantage mean and std), and the
        recurrent state or the critic's rows, weights and value counts (None where absent)."""
        critic = ((self.critic_epoch[name], self.critic_weight[name]) if self.state_dim else (None, None))
        return (self.epoch[name], self.weight[name], self.counts[name], moments, self.hidden_epoch.get(name),
                *critic, self.value_counts[name])


__all__ = ["ADVANTAGE", "GroupColumns", "LOG_PROB", "PPOSamples", "RETURN", "START", "VALUE", "samples_bytes"]
