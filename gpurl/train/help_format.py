"""``--help`` text of gpurl's commands: each default said once."""
from __future__ import annotations

import argparse

_SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction)


class DefaultsOnceFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, without its repeats: a flag's default is appended only when there is one
    to say (not None), its help does not already say it, and it is not an on/off switch (whose default is the
    switch not given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default is None or "default" in text.lower() or isinstance(action, _SWITCHES):
            return text
        return super()._get_help_string(action)
