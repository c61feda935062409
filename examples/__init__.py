"""Runnable examples of gpurl (``import examples.custom_env`` from the repository root)."""
