"""Training: the trainer loop over the algorithm interface, rollout storage, config, logs, checkpoints
and the ``gpurl train`` command (``python -m gpurl.train``)."""
from .config import PRESETS, TrainConfig, build_config
from .trainer import NonFiniteLossError, Trainer

__all__ = ["PRESETS", "NonFiniteLossError", "TrainConfig", "Trainer", "build_config"]
