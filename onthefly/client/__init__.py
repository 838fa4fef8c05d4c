"""The Python client of a live session: ``onthefly.connect(run)`` returns a :class:`Client`.

Modules: ``client`` (the command methods and :func:`connect`), ``connection`` (the websocket
and its single request path), ``resolve`` (which live session a run name means). Never
imports torch.
"""

from __future__ import annotations

from onthefly.client.client import Client, connect
from onthefly.client.connection import StreamMessage

__all__ = ["Client", "StreamMessage", "connect"]
