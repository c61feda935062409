"""Training: policies, rollout storage, PPO/A2C, config, logging and checkpoints."""
from .config import PRESETS, TrainConfig, build_config
from .trainer import NonFiniteLossError, Trainer

__all__ = ["PRESETS", "NonFiniteLossError", "TrainConfig", "Trainer", "build_config"]
