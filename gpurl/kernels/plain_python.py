"""Env phases as plain, uncompiled Python (for :meth:`~.program.EnvKernel.run_python`, the debugging aid and the
first launches' bounds check): each device helper swapped for its plain implementation on a target."""
from __future__ import annotations

import types
from typing import Callable

from .targets import DeviceFunction


def _plain_python(pyfunc: Callable, cache: dict, constants: tuple = (), target: str = "cpu") -> Callable:
    """``pyfunc`` with every DeviceFunction it names replaced by its plain ``target`` implementation
    (recursively) and every global named in ``constants`` by its value, so that :meth:`EnvKernel.run_python`
    runs what the ``target`` build compiles. Code objects are shared, so tracebacks point at the author's source."""
    if id(pyfunc) in cache:
        return cache[id(pyfunc)]
    cache[id(pyfunc)] = pyfunc  # a self-referencing helper stops here
    g = pyfunc.__globals__
    names = [n for n in pyfunc.__code__.co_names if isinstance(g.get(n), DeviceFunction)]
    fixed = {n: v for n, v in constants if n in pyfunc.__code__.co_names and n in g}
    if not names and not fixed:
        return pyfunc
    plain_globals = dict(g)
    plain_globals.update(fixed)
    for name in names:
        helper = plain_globals[name]
        plain_globals[name] = _plain_python(helper.plain(target), cache, constants, target)
    clone = types.FunctionType(pyfunc.__code__, plain_globals, pyfunc.__name__, pyfunc.__defaults__,
                               pyfunc.__closure__)
    cache[id(pyfunc)] = clone
    return clone
