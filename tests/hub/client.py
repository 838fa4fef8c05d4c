"""A real websocket client of the hub, as a browser tab of the hub's page would be."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from onthefly.hub import Hub


def listing(hub: Hub, token: str | None = None) -> dict[str, Any]:
    """``GET /sessions`` of the hub (its own token unless another is given)."""
    url = f"http://127.0.0.1:{hub.port}/sessions?token={token or hub.token}"
    with urllib.request.urlopen(url, timeout=10) as response:
        document: dict[str, Any] = json.loads(response.read())
    return document


def status_of(url: str) -> int:
    """The HTTP status of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def eventually(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """``check()``'s first true value, asked every 50 ms; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s: {check}")
        time.sleep(0.05)
