"""The hub's address file, ``$ONTHEFLY_HOME/hub.json``: where a running hub is, and its token.

Written ``0600`` when a hub starts (it holds the token); when it stops, its ``pid`` becomes 0
and the file stays, so the next hub of the same home reuses the token: its address stays
the same across restarts (bookmark it). :func:`running_hub` tells whether the hub it names
still runs.

This module is imported by the CLI: it must not import torch or websockets.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from onthefly.errors import ConfigurationError
from onthefly.server.discovery import home_dir, process_alive, write_private_json

FILE_NAME = "hub.json"


@dataclass(frozen=True)
class HubFile:
    """A hub's address.

    Attributes:
        pid: the hub's process.
        port: its TCP port on 127.0.0.1.
        token: the secret its pages and sockets need.
        url: its address, token included.
        started_at: UNIX time it started.
    """

    pid: int
    port: int
    token: str
    url: str
    started_at: float


def hub_path(home: str | os.PathLike[str] | None = None) -> Path:
    """Where the hub of ``home`` (default ``$ONTHEFLY_HOME``, else ``~/.onthefly``) writes
    its address."""
    return home_dir(home) / FILE_NAME


def read_hub(home: str | os.PathLike[str] | None = None) -> HubFile | None:
    """The address last written, running or not (``None``: none, or unreadable)."""
    try:
        data = json.loads(hub_path(home).read_text(encoding="utf-8"))
        hub = HubFile(**{key: data[key] for key in HubFile.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hub if isinstance(hub.pid, int) and isinstance(hub.token, str) else None


def running_hub(home: str | os.PathLike[str] | None = None) -> HubFile | None:
    """The hub of ``home`` if its process still runs."""
    hub = read_hub(home)
    if hub is None or hub.pid <= 0 or not process_alive(hub.pid):
        return None
    return hub


def hub_token(home: str | os.PathLike[str] | None = None) -> str:
    """The token of the last hub of ``home`` (a stable address), or a new one."""
    hub = read_hub(home)
    return hub.token if hub is not None and len(hub.token) >= 16 else secrets.token_urlsafe(24)


def write_hub(hub: HubFile, home: str | os.PathLike[str] | None = None) -> Path:
    """Write the address atomically, readable by this user only.

    Raises:
        ConfigurationError: the home folder cannot be created or written.
    """
    target = hub_path(home)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private_json(target, asdict(hub))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the hub's address in {target.parent} ({exc.strerror}); expected a "
            "writable folder (set ONTHEFLY_HOME to choose another)"
        ) from exc
    return target
