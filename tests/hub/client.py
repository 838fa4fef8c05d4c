"""A real websocket client of the hub, as a browser tab of the hub's page would be."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
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
