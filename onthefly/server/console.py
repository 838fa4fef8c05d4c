"""What the session server prints on the training process's console.

Two kinds of line: the dashboard's address when the server starts, and one line the first
time each kind of dashboard (a browser tab, VS Code) connects. Scripts and the CLI connect
all the time (``onthefly status``, ``onthefly.connect``) and reconnecting dashboards come
back after every drop: neither is news, so neither prints. Lines go through tqdm, so that a
progress bar on the console (the native trainer's, Lightning's) is redrawn below them
instead of being broken.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from tqdm import tqdm

VSCODE_AGENT = "onthefly-vscode"
"""The ``User-Agent`` the VS Code extension's connections carry."""


def announce(text: str) -> None:
    """Print ``text`` as one line of stdout above any progress bar, and flush it."""
    tqdm.write(text, file=sys.stdout)
    sys.stdout.flush()


def dashboard_kind(headers: Mapping[str, str]) -> str | None:
    """``"browser"`` or ``"VS Code"`` for a dashboard's websocket request, ``None`` for other
    clients (the CLI, the Python client, a script).

    Args:
        headers: the upgrade request's headers.
    """
    if headers.get("User-Agent", "").startswith(VSCODE_AGENT):
        return "VS Code"
    # Browsers always send an Origin with a websocket; the Python client never does.
    return "browser" if headers.get("Origin") else None
