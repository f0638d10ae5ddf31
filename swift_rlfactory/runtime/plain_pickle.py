"""Unpickling that builds plain data and runs nothing: for bytes another process wrote.

``pickle.loads`` runs any callable the bytes name; bytes from a process that runs model-written code (an
isolated call's child, :mod:`swift_rlfactory.runtime.process`) must not get that power in the trainer.
This module imports the standard library only, so a child interpreter loads it in milliseconds.
"""

from __future__ import annotations

import io
import pickle
from typing import Any


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that resolves no global at all: every class, function or extension code is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain_loads(data: bytes) -> Any:
    """Unpickle ``data`` that holds plain data only; raise :class:`pickle.UnpicklingError` for anything else.

    Plain containers and scalars have opcodes of their own, so they load without naming a global; a pickle
    can call code only through a global it names (``REDUCE``, ``INST``, ``OBJ``, ``NEWOBJ`` and the
    extension registry all go through ``find_class``), and here every one is refused.

    >>> plain_loads(pickle.dumps({"rows": [1, 2.5, None], "raw": b"x", "pair": (True, "y")}))
    {'rows': [1, 2.5, None], 'raw': b'x', 'pair': (True, 'y')}
    >>> plain_loads(pickle.dumps(print))
    Traceback (most recent call last):
    ...
    _pickle.UnpicklingError: builtins.print is not plain data
    """
    return _PlainUnpickler(io.BytesIO(data)).load()
