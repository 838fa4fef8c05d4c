"""Discovery files: how the CLI, the Python client and the extension find live sessions.

Each live session owns ``$ONTHEFLY_HOME/sessions/<pid>-<port>.json`` (``ONTHEFLY_HOME``
defaults to ``~/.onthefly``). The directories are created ``0700`` and the file ``0600``
because it holds the session's token; it is written atomically (temporary file, then
rename) so readers never see half a file. Files left behind by dead processes are ignored
and removed by :func:`list_sessions`.

This module is imported by the CLI: it must not import torch or websockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from onthefly.errors import ConfigurationError

_KEYS = ("pid", "port", "token", "project", "run", "started_at", "session", "url")


@dataclass(frozen=True)
class SessionFile:
    """The content of one discovery file.

    Attributes:
        pid: the training process.
        port: the session server's TCP port on 127.0.0.1.
        token: the secret every connection must present.
        project: the project name given to the session.
        run: the name of the session's main run.
        started_at: UNIX time the session started.
        session: the session id (as in ``hello`` and every event).
        url: the dashboard address, token included.
        viewing: for a read-only ``onthefly view`` of an exported session, the file it
            serves; ``None`` for a live training run.
    """

    pid: int
    port: int
    token: str
    project: str
    run: str
    started_at: float
    session: str
    url: str
    viewing: str | None = None


def home_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The OnTheFly home: ``home`` if given, else ``$ONTHEFLY_HOME``, else ``~/.onthefly``."""
    if home is not None:
        return Path(home)
    env = os.environ.get("ONTHEFLY_HOME")
    return Path(env) if env else Path.home() / ".onthefly"


def sessions_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding the discovery files."""
    return home_dir(home) / "sessions"


def write_private_json(target: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``target`` atomically, readable by this user only.

    The JSON goes to a temporary file beside ``target`` (``mkstemp`` creates it ``0600``, so a
    token in it is never readable by others), which is then renamed over ``target``: readers
    see the old file or the new one, never half of one.

    Raises:
        OSError: the folder cannot be written (no temporary file is left behind).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{target.stem}-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(value, out)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_session(info: SessionFile, home: str | os.PathLike[str] | None = None) -> Path:
    """Write ``info`` atomically as ``<pid>-<port>.json`` (mode 0600) and return its path.

    The sessions folder is made 0700 if it existed with wider rights.

    Raises:
        ConfigurationError: the home folder cannot be created or written, or its sessions
            folder belongs to another user.
    """
    folder = sessions_dir(home)
    try:
        for path in (folder.parent, folder):
            path.mkdir(mode=0o700, exist_ok=True)
        _make_private(folder)
        target = folder / f"{info.pid}-{info.port}.json"
        write_private_json(target, asdict(info))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the session file in {folder} ({exc.strerror}); "
            "expected a writable folder (set ONTHEFLY_HOME to choose another)"
        ) from exc
    return target


def _make_private(folder: Path) -> None:
    """The discovery folder is ours alone: 0700 even if it existed with wider rights."""
    owner = folder.stat().st_uid
    if hasattr(os, "getuid") and owner != os.getuid():
        raise ConfigurationError(
            f"the session folder {folder} belongs to another user (uid {owner}); expected a "
            "folder of your own (set ONTHEFLY_HOME to one)"
        )
    folder.chmod(0o700)


def remove_session(path: Path) -> None:
    """Remove a discovery file; a file already gone is fine."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[SessionFile]:
    """The live sessions, oldest first; files of dead processes are deleted on the way.

    Unreadable or malformed files are skipped (and left alone: they are not ours to judge).

    Example:
        >>> for session in list_sessions():
        ...     print(session.project, session.run, session.url)
    """
    folder = sessions_dir(home)
    found: list[SessionFile] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        info = _read(path)
        if info is None:
            continue
        if not process_alive(info.pid):
            remove_session(path)
            continue
        found.append(info)
    return sorted(found, key=lambda s: s.started_at)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (another user's counts as running; a zombie does not)."""
    # A killed process whose parent has not reaped it yet is a zombie: its pid still
    # exists, but it serves nothing.
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, ValueError):  # ValueError: a negative pid
        return False
    except psutil.AccessDenied:  # another user's process: alive, not ours to judge
        return True


def _read(path: Path) -> SessionFile | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = SessionFile(**{key: data[key] for key in _KEYS}, viewing=data.get("viewing"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(info.pid, int) and isinstance(info.port, int)):
        return None
    if info.viewing is not None and not isinstance(info.viewing, str):
        return None
    return info
