"""``python -m gpurl.train [flags]``: the training command (see :mod:`gpurl.train.cli`)."""
from .cli import main

main(prog="python -m gpurl.train")
