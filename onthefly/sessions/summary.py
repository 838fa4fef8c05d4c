"""``onthefly inspect``: what a session file holds, read without torch (zip + JSON only)."""

from __future__ import annotations

import datetime
import os
from typing import Any

from onthefly.sessions.archive import Limits, SessionArchive

_SECTIONS = (("state/", "state"), ("history/", "history"), ("files/", "files"))


def summarize(
    path: str | os.PathLike[str], verify: bool = False, limits: Limits | None = None
) -> dict[str, Any]:
    """The manifest and the members (name and size) of a session file.

    Args:
        path: the session file.
        verify: also check every member's checksum (reads the whole file).
        limits: the bounds the file must respect (default :class:`Limits`).

    Raises:
        SessionFileError: the file is not a readable session file, or (``verify``) a
            member is corrupt.

    Example:
        >>> summarize("run.otf")["manifest"]["step"]  # doctest: +SKIP
        118
    """
    with SessionArchive(path, limits or Limits()) as archive:
        if verify:
            archive.verify()
        members = {name: archive.size(name) for name in archive.names()}
        return {
            "path": str(archive.path),
            "bytes": archive.path.stat().st_size,
            "manifest": archive.manifest.model_dump(mode="json", exclude={"members"}),
            "members": members,
            "verified": verify,
        }


def render(data: dict[str, Any]) -> str:
    """:func:`summarize`'s result as readable text."""
    m = data["manifest"]
    created = datetime.datetime.fromtimestamp(m["created_at"]).isoformat(timespec="seconds")
    lines = [
        f"{data['path']} ({_size(data['bytes'])}), session format {m['format_version']}"
        + (", checksums verified" if data["verified"] else ""),
        f"  run        {m['project']}/{m['run_name']} ({m['driver']}, {m['reason']})",
        f"  position   step {m['step']}, epoch {m['epoch']}, batch {m['batch_in_epoch']}",
        f"  written    {created} by onthefly {m['onthefly_version']}, torch "
        f"{m['torch_version']}, lightning {m['lightning_version']}",
    ]
    if m["trainer"]:
        config = ", ".join(f"{k}={v}" for k, v in m["trainer"].items())
        lines.append(f"  trainer    {config}")
    for prefix, label in _SECTIONS:
        names = {k: v for k, v in data["members"].items() if k.startswith(prefix)}
        if names:
            lines.append(f"  {label:<10} {len(names)} member(s), {_size(sum(names.values()))}")
            lines.extend(f"    {name}  {_size(size)}" for name, size in names.items())
    return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
