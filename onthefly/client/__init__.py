"""The Python client of a live session: ``onthefly.connect(run)`` returns a :class:`Client`.

Modules: ``client`` (the command methods), ``connection`` (the websocket and its single
request path), ``resolve`` (which live session a run name means). Names load lazily, so that
``resolve`` (used by ``onthefly runs``) never imports websockets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Client", "StreamMessage", "connect"]

_LAZY = {
    "Client": "onthefly.client.client",
    "connect": "onthefly.client.client",
    "StreamMessage": "onthefly.client.connection",
}

if TYPE_CHECKING:
    from onthefly.client.client import Client, connect
    from onthefly.client.connection import StreamMessage


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onthefly.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
