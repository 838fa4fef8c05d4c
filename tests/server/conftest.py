"""Real servers on free ports, always closed, and a tiny synchronous client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from onthefly.server import SessionServer


@pytest.fixture
def server() -> Iterator[SessionServer]:
    with SessionServer("proj", "main", port=0, quiet=True) as started:
        yield started


@contextmanager
def open_client(server: SessionServer, **kwargs: Any) -> Iterator[ClientConnection]:
    """A connected client whose ``hello`` was already read; closed on exit."""
    with connect(server.ws_url, open_timeout=5, **kwargs) as ws:
        hello = recv(ws)
        assert hello["type"] == "hello"
        yield ws


def recv(ws: ClientConnection, timeout: float = 5) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=timeout))
    return message


def ask(ws: ClientConnection, **command: Any) -> dict[str, Any]:
    """Send a command and return its answer, skipping stream messages."""
    ws.send(json.dumps(command))
    return answer(ws, command.get("id"))


def answer(ws: ClientConnection, command_id: str | None) -> dict[str, Any]:
    while True:
        message = recv(ws)
        if message["type"] in ("reply", "error") and message["id"] == command_id:
            return message
