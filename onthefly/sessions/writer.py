"""Writing a session file atomically (reading is :mod:`onthefly.sessions.archive`).

:class:`ArchiveWriter` writes to a temporary file in the target's directory, which is
flushed, ``fsync``-ed and then renamed over the target with ``os.replace``: a crash, a
``kill -9`` or a full disk in the middle of an export leaves an earlier file of the same
name intact (a stale ``.NAME.*.partial`` file may remain after a ``kill -9``). Tensors are
stored uncompressed (``ZIP_STORED``) so an export costs about what ``torch.save`` does;
JSON members are deflated. Only :meth:`ArchiveWriter.add_torch` imports torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from onthefly.errors import SessionFileError
from onthefly.protocol import FILE_EXISTS
from onthefly.sessions.manifest import MANIFEST_NAME, Manifest
from onthefly.sessions.signals import signals_deferred

SUFFIX = ".otf"
_CHUNK = 8 << 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ArchiveWriter:
    """Builds one session file; nothing is visible at ``path`` until :meth:`commit`.

    Args:
        path: the final file.
        overwrite: replace a file already at ``path`` (else :meth:`commit` refuses it).

    Raises:
        SessionFileError: the temporary file cannot be created (missing or read-only
            directory, full disk).

    Example:
        >>> with ArchiveWriter(Path("run.otf")) as writer:  # doctest: +SKIP
        ...     writer.add_json("history/history.json", {"runs": []})
        ...     writer.commit(manifest)
    """

    def __init__(self, path: Path, overwrite: bool = True) -> None:
        self.path = path
        self.overwrite = overwrite
        self.sizes: dict[str, int] = {}
        try:
            handle, temp = tempfile.mkstemp(
                prefix=f".{path.name}.", suffix=".partial", dir=path.parent
            )
        except OSError as exc:
            raise _write_error(path, exc) from None
        self._temp = Path(temp)
        self._file = os.fdopen(handle, "w+b")
        self._zip = zipfile.ZipFile(self._file, "w", zipfile.ZIP_STORED, allowZip64=True)
        self._committed = False

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if not self._committed:
            self.abort()
        if isinstance(exc, OSError):
            raise _write_error(self.path, exc) from exc

    def add_json(self, name: str, document: Any) -> None:
        """A deflated JSON member (NaN and infinities are refused: JSON has none)."""
        data = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
        self._zip.writestr(_info(name, zipfile.ZIP_DEFLATED), data)
        self.sizes[name] = len(data)

    def add_torch(self, name: str, obj: Any) -> None:
        """A stored member holding ``torch.save(obj)``, readable with ``weights_only=True``."""
        import torch

        # The outer zip already checksums the member; torch's own CRC would be computed twice.
        crc = torch.serialization.get_crc32_options()
        torch.serialization.set_crc32_options(False)
        try:
            with (
                self._zip.open(_info(name, zipfile.ZIP_STORED), "w", force_zip64=True) as out,
                signals_deferred(),  # torch would turn a Ctrl+C in out.write into an error
            ):
                torch.save(obj, out)
        finally:
            torch.serialization.set_crc32_options(crc)
        self.sizes[name] = self._zip.getinfo(name).file_size

    def add_file(self, name: str, source: Path) -> None:
        """A stored copy of ``source`` (e.g. a Parquet file from the session's folder)."""
        with (
            source.open("rb") as src,
            self._zip.open(_info(name, zipfile.ZIP_STORED), "w", force_zip64=True) as out,
        ):
            shutil.copyfileobj(src, out, _CHUNK)
        self.sizes[name] = self._zip.getinfo(name).file_size

    def commit(self, manifest: Manifest) -> Path:
        """Write the manifest, make the file durable and move it to :attr:`path`.

        Returns:
            The final path.

        Raises:
            SessionFileError: without ``overwrite``, a file appeared at :attr:`path` meanwhile.
        """
        manifest = manifest.model_copy(update={"members": dict(self.sizes)})
        self._zip.writestr(_info(MANIFEST_NAME, zipfile.ZIP_DEFLATED), manifest.model_dump_json())
        self._zip.close()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        if not self.overwrite:
            refuse_existing(self.path)
        os.replace(self._temp, self.path)
        self._committed = True
        _fsync_directory(self.path.parent)
        return self.path

    def abort(self) -> None:
        """Drop the temporary file; the target is left as it was."""
        with contextlib.suppress(Exception):
            self._zip.close()
        with contextlib.suppress(Exception):
            self._file.close()
        with contextlib.suppress(OSError):
            self._temp.unlink()


def _info(name: str, compression: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = compression
    return info


def _fsync_directory(folder: Path) -> None:
    # The rename itself must survive a power cut; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_error(path: Path, exc: OSError) -> SessionFileError:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return SessionFileError(
        f"could not write the session file {path}: {reason}; an earlier file of that name is "
        "untouched and the run goes on"
    )


def refuse_existing(path: Path) -> None:
    """Raise when something (a file, a link, a pipe) is already at ``path``.

    Raises:
        SessionFileError: the message ends in :data:`onthefly.protocol.FILE_EXISTS`.
    """
    if os.path.lexists(path):
        raise SessionFileError(f"{path} {FILE_EXISTS}")


def export_path(raw: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Check where an export should go; ``.otf`` is appended when missing.

    Args:
        raw: the requested path (relative paths are relative to the current directory).
        overwrite: a file already there may be replaced.

    Raises:
        SessionFileError: empty, with control characters, a directory, a parent directory
            that does not exist or cannot be read, a name the file system refuses, or
            (without ``overwrite``) an existing file.
    """
    text = os.fspath(raw)
    if not text.strip():
        raise SessionFileError("the export path is empty; expected a file name such as run.otf")
    if _CONTROL.search(text):
        raise SessionFileError(
            f"the export path {text!r} contains control characters; expected a plain file name"
        )
    path = Path(text).expanduser()
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    path = path.absolute()
    try:
        if not path.parent.is_dir():
            raise SessionFileError(
                f"cannot export to {path}: the directory {path.parent} does not exist; expected "
                "an existing directory"
            )
        if path.is_dir():
            raise SessionFileError(
                f"cannot export to {path}: it is a directory; expected a file name"
            )
        os.lstat(path.parent)  # a name too long, say, is refused here rather than half-way
    except OSError as exc:
        raise SessionFileError(f"cannot export to {path}: {exc.strerror or exc}") from None
    if not overwrite:
        refuse_existing(path)
    return path
