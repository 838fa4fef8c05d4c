"""What a session file may hold, checked before anything in it is decompressed: its bounds
(:class:`Limits`) and its members' names and sizes (:func:`checked_infos`)."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from onthefly.errors import SessionFileError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Limits:
    """Bounds a session file must respect before anything in it is decompressed.

    Attributes:
        max_members: most members in the archive.
        max_member_bytes: largest uncompressed member.
        max_total_bytes: largest sum of uncompressed members.
        max_ratio: largest uncompressed/compressed ratio of a deflated member (zip bombs).
        max_json_bytes: largest JSON member read into memory (the history).
        max_json_memory: most memory a JSON member may take once parsed (estimated before
            parsing; see :mod:`onthefly.sessions.bounded_json`).
        max_manifest_bytes, max_manifest_memory: the same two for ``manifest.json``, read
            by every command that opens a file (``onthefly inspect`` reads nothing else).
        max_json_depth: deepest nesting of a JSON member.
        verify_bytes: tensor members up to this size are checksummed on every load.
    """

    max_members: int = 100_000
    max_member_bytes: int = 64 << 30
    max_total_bytes: int = 256 << 30
    max_ratio: float = 1000.0
    max_json_bytes: int = 256 << 20
    max_json_memory: int = 768 << 20
    max_manifest_bytes: int = 16 << 20
    max_manifest_memory: int = 48 << 20
    max_json_depth: int = 64
    verify_bytes: int = 16 << 20


def checked_infos(
    archive: zipfile.ZipFile, path: Path, limits: Limits
) -> dict[str, zipfile.ZipInfo]:
    """The members of ``archive`` by name, each checked against ``limits``.

    Raises:
        SessionFileError: too many members, an unsafe or repeated name, a name that is both
            a file and a folder, a member too large or too compressed, an unsupported
            compression, or too many bytes in all.
    """
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise SessionFileError(
            f"{path} has {len(infos)} members; expected at most {limits.max_members}"
        )
    checked: dict[str, zipfile.ZipInfo] = {}
    folders: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        if not safe_member_name(name):
            raise SessionFileError(
                f"{path} has an unsafe member name {name!r}; expected relative names "
                "without '..', backslashes or control characters"
            )
        if name in checked:
            raise SessionFileError(f"{path} holds the member {name!r} twice")
        _check_no_collision(path, name, checked, folders)
        if info.file_size > limits.max_member_bytes:
            raise SessionFileError(
                f"{path}: member {name} is {info.file_size} bytes; expected at most "
                f"{limits.max_member_bytes}"
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise SessionFileError(f"{path}: member {name} uses an unsupported compression")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.compress_type == zipfile.ZIP_DEFLATED and ratio > limits.max_ratio:
            raise SessionFileError(
                f"{path}: member {name} expands {ratio:.0f}-fold; expected at most "
                f"{limits.max_ratio:.0f} (a zip bomb?)"
            )
        total += info.file_size
        checked[name] = info
    if total > limits.max_total_bytes:
        raise SessionFileError(
            f"{path} expands to {total} bytes; expected at most {limits.max_total_bytes}"
        )
    return checked


def _check_no_collision(
    path: Path, name: str, files: dict[str, zipfile.ZipInfo], folders: set[str]
) -> None:
    """Refuse a name that is a file of one member and a folder of another (``files/x`` and
    ``files/x/y``): extracting both cannot work."""
    parts = name.rstrip("/").split("/")
    parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
    clash = next((p for p in parents if p in files), None)
    if clash is None and not name.endswith("/") and name in folders:
        clash = name
    if clash is not None:
        raise SessionFileError(
            f"{path} has {clash!r} both as a file and as a folder of other members; expected "
            "each name to be one or the other"
        )
    folders.update(parents)
    if name.endswith("/"):
        folders.add(name.rstrip("/"))


def safe_member_name(name: str) -> bool:
    """Whether a member name is a plain relative POSIX path (no ``..``, root or drive).

    Example:
        >>> safe_member_name("files/samples/train.parquet"), safe_member_name("../x")
        (True, False)
    """
    if not name or len(name) > 1024 or "\\" in name or _CONTROL.search(name):
        return False
    path = PurePosixPath(name)
    if path.is_absolute() or ":" in path.parts[0]:
        return False
    return all(part not in ("", ".", "..") for part in name.rstrip("/").split("/"))
