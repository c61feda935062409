"""What the algorithms read and write, below them: the rollout storage an iteration's steps fill, the replay
buffer off-policy learners draw from, and the :class:`Field` declarations of an algorithm's own buffers.

The trainer allocates them; an algorithm's actor and learner fragments read them (typed where they are used).
"""
from .fields import Field
from .frames import stack_frames
from .replay import REPLAY_FIELDS, ReplayBuffer, gather_rows, group_inputs, rollout_transitions, transition_bytes
from .rollout import ENV_FIELDS, STATE_FIELDS, RolloutStorage, rollout_bytes

__all__ = ["ENV_FIELDS", "Field", "REPLAY_FIELDS", "ReplayBuffer", "RolloutStorage", "STATE_FIELDS", "gather_rows",
           "group_inputs",
           "rollout_bytes", "rollout_transitions", "stack_frames", "transition_bytes"]
