"""Reading a session file defensively (writing is :mod:`onthefly.sessions.writer`).

:class:`SessionArchive` never runs code from the file: the manifest is JSON
validated with pydantic, tensors go through ``torch.load(weights_only=True)``, member names
are checked (no absolute paths, no ``..``, no name that is both a file and a folder), and
member count, sizes and compression ratios are bounded before anything is decompressed.
Checksums are verified for small members on every read and for all with
:meth:`SessionArchive.verify`. Every problem is a :class:`~onthefly.errors.SessionFileError`
that names the member and says what was wrong. Only the two torch methods import torch, so
``onthefly inspect`` runs without it.

Memory: a JSON member is read whole (at most :attr:`Limits.max_json_bytes`) and parsed only
once :mod:`onthefly.sessions.bounded_json` has bounded its depth and its parsed size (at most
:attr:`Limits.max_json_memory`), so reading the largest allowed member peaks at about
``max_json_bytes + max_json_memory``: 1 GiB, 4 times the largest member, with the defaults
(the manifest: 64 MiB). Tensor members are read by ``torch.load`` straight from the file.
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from onthefly.errors import SessionFileError
from onthefly.sessions import bounded_json
from onthefly.sessions.manifest import MANIFEST_NAME, Manifest, validate_manifest
from onthefly.sessions.members import Limits, checked_infos
from onthefly.sessions.signals import signals_deferred

SUFFIX = ".otf"
_CHUNK = 8 << 20
_LOCAL_HEADER = b"PK\x03\x04"
Model = TypeVar("Model", bound=BaseModel)
_DEFAULT_LIMITS = Limits()


# ----------------------------------------------------------------------------------- reading


class SessionArchive:
    """An open session file whose structure and manifest have been checked.

    Args:
        path: the ``.otf`` file.
        limits: the bounds to enforce.

    Raises:
        SessionFileError: missing file, corrupt or truncated zip, not a session file, a newer
            format version, unsafe member names, or sizes over ``limits``.

    Example:
        >>> with SessionArchive(Path("run.otf")) as archive:  # doctest: +SKIP
        ...     print(archive.manifest.step, archive.names())
    """

    def __init__(self, path: str | os.PathLike[str], limits: Limits = _DEFAULT_LIMITS) -> None:
        self.path = Path(path)
        self.limits = limits
        if not self.path.is_file():
            raise SessionFileError(f"no session file at {self.path}")
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
            raise SessionFileError(
                f"{self.path} is not a readable session file (corrupt or truncated: {exc})"
            ) from None
        try:
            self._infos = checked_infos(self._zip, self.path, limits)
            if MANIFEST_NAME not in self._infos:
                raise SessionFileError(
                    f"{self.path} is not an OnTheFly session file: it has no {MANIFEST_NAME}"
                )
            self.manifest: Manifest = validate_manifest(
                self.read_json(MANIFEST_NAME), str(self.path)
            )
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> SessionArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._zip.close()

    def names(self) -> list[str]:
        """Every member name, in archive order."""
        return list(self._infos)

    def size(self, name: str) -> int:
        """A member's uncompressed size in bytes."""
        return self._info(name).file_size

    def read_bytes(self, name: str) -> bytes:
        """A member's content, checksum verified (only for small members: JSON, manifests).

        Raises:
            SessionFileError: unknown member, over ``max_json_bytes`` (``max_manifest_bytes``
                for the manifest), or corrupt.
        """
        info = self._info(name)
        limit, _ = self._json_limits(name)
        if info.file_size > limit:
            raise SessionFileError(
                f"{self.path}: member {name} is {info.file_size} bytes; expected at most {limit}"
            )
        try:
            with self._zip.open(info) as member:
                data = member.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
            raise SessionFileError(f"{self.path}: member {name} is corrupt ({exc})") from None
        if len(data) > limit:
            raise SessionFileError(f"{self.path}: member {name} is larger than its header says")
        return data

    def read_json(self, name: str) -> Any:
        """A JSON member, parsed once its depth and parsed size are known to fit the limits.

        Raises:
            SessionFileError: unknown, corrupt, not JSON, nested deeper than
                ``max_json_depth``, or larger than its memory limit once parsed.
        """
        _, memory = self._json_limits(name)
        text = self.read_bytes(name)
        try:
            return bounded_json.loads(text, max_depth=self.limits.max_json_depth, max_memory=memory)
        except bounded_json.JsonLimitError as exc:
            raise SessionFileError(f"{self.path}: member {name} was refused: {exc}") from None
        except (ValueError, RecursionError):
            raise SessionFileError(f"{self.path}: member {name} is not valid JSON") from None

    def read_model(self, name: str, model: type[Model]) -> Model:
        """A JSON member validated as ``model`` (e.g. the history as a ``Snapshot``).

        Raises:
            SessionFileError: as :meth:`read_json`, or the member does not fit ``model``.
        """
        document = self.read_json(name)
        try:
            return model.model_validate(document)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "(root)"
            raise SessionFileError(
                f"{self.path}: member {name} is not a valid {model.__name__} "
                f"({exc.error_count()} problem(s), first at {where}: {first['msg']})"
            ) from None

    def _json_limits(self, name: str) -> tuple[int, int]:
        limits = self.limits
        if name == MANIFEST_NAME:
            return limits.max_manifest_bytes, limits.max_manifest_memory
        return limits.max_json_bytes, limits.max_json_memory

    def load_torch(self, name: str, map_location: Any = "cpu", verify: bool | None = None) -> Any:
        """A ``torch.save``-d member, loaded with ``weights_only=True``.

        Args:
            name: the member.
            map_location: where tensors go (``torch.load``'s argument).
            verify: check the member's CRC-32 first. ``None`` checks members up to
                :attr:`Limits.verify_bytes` (a full check of a large tensor member would
                nearly double the load time; ``onthefly inspect --verify`` checks all).

        Raises:
            SessionFileError: unknown member, corrupt, or holding anything but tensors and
                plain containers (a file crafted to run code is refused here, unrun).
        """
        import pickle

        import torch

        info = self._info(name)
        if info.compress_type != zipfile.ZIP_STORED:
            raise SessionFileError(f"{self.path}: member {name} is compressed; expected stored")
        offset = self._data_offset(info)
        if verify is None:
            verify = info.file_size <= self.limits.verify_bytes
        if verify and not _crc_matches(self.path, offset, info):
            raise SessionFileError(f"{self.path}: member {name} is corrupt (checksum mismatch)")
        try:
            with self.path.open("rb") as raw, signals_deferred():
                # (torch would turn a Ctrl+C in window.read into a corrupt-file error)
                window = cast(IO[bytes], _Window(raw, offset, info.file_size))
                return torch.load(window, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            raise SessionFileError(
                f"{self.path}: member {name} was refused: it holds objects that loading would "
                f"have to run code for, which session files never need ({_first_line(exc)})"
            ) from None
        except (RuntimeError, EOFError, ValueError, OSError) as exc:
            raise SessionFileError(
                f"{self.path}: member {name} is corrupt ({_first_line(exc)})"
            ) from None

    def verify(self) -> None:
        """Check every member's CRC-32 (reads the whole file).

        Raises:
            SessionFileError: names the first corrupt member.
        """
        for name, info in self._infos.items():
            if info.compress_type == zipfile.ZIP_STORED:
                ok = _crc_matches(self.path, self._data_offset(info), info)
            else:
                try:
                    with self._zip.open(info) as member:
                        while member.read(_CHUNK):
                            pass
                    ok = True
                except (zipfile.BadZipFile, zlib.error, EOFError):
                    ok = False
            if not ok:
                raise SessionFileError(f"{self.path}: member {name} is corrupt (checksum mismatch)")

    def extract(self, prefix: str, destination: Path) -> list[Path]:
        """Copy the members under ``prefix`` (e.g. ``files/``) into ``destination``.

        Returns:
            The files written.

        Raises:
            SessionFileError: a member is corrupt.
        """
        written = []
        for name, info in self._infos.items():
            if not name.startswith(prefix) or name.endswith("/"):
                continue
            target = destination.joinpath(*PurePosixPath(name[len(prefix) :]).parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with self._zip.open(info) as src, target.open("wb") as out:
                    _copy_bounded(src, out, info.file_size)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise SessionFileError(f"{self.path}: member {name} is corrupt ({exc})") from None
            except OSError as exc:  # a full disk, say; the folder is private, not named
                reason = exc.strerror or type(exc).__name__
                raise SessionFileError(
                    f"{self.path}: member {name} could not be extracted ({reason})"
                ) from None
            written.append(target)
        return written

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = self._infos.get(name)
        if info is None:
            raise SessionFileError(f"{self.path} has no member {name!r}; the file is incomplete")
        return info

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        with self.path.open("rb") as raw:
            raw.seek(info.header_offset)
            header = raw.read(30)
        if len(header) < 30 or header[:4] != _LOCAL_HEADER:
            raise SessionFileError(f"{self.path}: member {info.filename} has a damaged header")
        name_len = int.from_bytes(header[26:28], "little")
        extra_len = int.from_bytes(header[28:30], "little")
        return info.header_offset + 30 + name_len + extra_len


class _Window(io.RawIOBase):
    """A read-only, seekable view of ``size`` bytes at ``offset`` of an open file."""

    def __init__(self, raw: io.BufferedReader, offset: int, size: int) -> None:
        super().__init__()
        self._raw, self._offset, self._size, self._pos = raw, offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        count = min(len(view), self._size - self._pos)
        if count <= 0:
            return 0
        self._raw.seek(self._offset + self._pos)
        got = self._raw.readinto(view[:count]) or 0
        self._pos += got
        return got


def _crc_matches(path: Path, offset: int, info: zipfile.ZipInfo) -> bool:
    crc, left = 0, info.file_size
    with path.open("rb") as raw:
        raw.seek(offset)
        while left:
            chunk = raw.read(min(left, _CHUNK))
            if not chunk:
                return False
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    return crc == info.CRC


def _copy_bounded(src: IO[bytes], out: IO[bytes], size: int) -> None:
    left = size
    while chunk := src.read(min(_CHUNK, left + 1)):
        left -= len(chunk)
        if left < 0:
            raise zipfile.BadZipFile("the member is larger than its header says")
        out.write(chunk)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
