"""Training: the trainer loop over the algorithm interface, the run's config (the algorithm's parameters are
its own: gpurl.algos), presets, logs, checkpoints and the ``gpurl train`` command (``python -m gpurl.train``)."""
from .config import TrainConfig, build_config
from .presets import PRESETS
from .trainer import NonFiniteLossError, Trainer

__all__ = ["PRESETS", "NonFiniteLossError", "TrainConfig", "Trainer", "build_config"]
