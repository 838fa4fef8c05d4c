"""Session files built to the edge of what the reader allows, and measured while read.

:func:`worst_history` writes a file whose history member is as large as the limits let it be
in one of the costliest shapes per byte (numbers validated into another type, small objects
validated into models, strings of astral characters), with random content so that it
compresses no better than a real one; :mod:`tests.hardening.read_session` measures reading it.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from onthefly.sessions.archive import Limits
from onthefly.sessions.bounded_json import measure
from tests.sessions.test_archive import manifest_bytes

SHAPES = ("integer values", "log records", "astral strings")
_RUN = (
    b'{"run":"r","project":"p","name":"n","state":"finished","step":0,"epoch":0,'
    b'"started_at":0.0,"series":{"train/loss":{"steps":[%s],"values":[%s]}}}'
)
_HEAD = b'{"type":"snapshot","v":1,"session":"s","seq":0,"time":0.0,'


def deep(depth: int, seed: int = 0) -> bytes:
    """Arrays nested ``depth`` deep, with random spaces so that it compresses like data."""
    rng = np.random.default_rng(seed)
    spaces = np.where(rng.integers(0, 2, size=2 * depth) == 1, ord(" "), 0).astype(np.uint8)
    brackets = np.array([ord("[")] * depth + [ord("]")] * depth, dtype=np.uint8)
    return np.stack([brackets, spaces], axis=1).tobytes().replace(b"\0", b"")


def wide(count: int, seed: int = 0) -> bytes:
    """An array of ``count`` one-digit arrays (random digits): tiny text, many objects."""
    table = np.empty((count, 4), dtype=np.uint8)
    table[:, 0], table[:, 2], table[:, 3] = ord("["), ord("]"), ord(",")
    table[:, 1] = ord("0") + np.random.default_rng(seed).integers(0, 10, size=count)
    return b"[" + table.tobytes()[:-1] + b"]"


def _snapshot(runs: bytes = b"", logs: bytes = b"") -> bytes:
    return _HEAD + b'"runs":[' + runs + b'],"logs":[' + logs + b"]}"


def _digits(count: int, rng: np.random.Generator) -> bytes:
    """``count`` random 7-digit integers, comma-separated, built without Python loops."""
    numbers = rng.integers(1_000_000, 10_000_000, size=count)
    table = np.empty((count, 8), dtype=np.uint8)
    for column in range(6, -1, -1):
        table[:, column] = ord("0") + numbers % 10
        numbers //= 10
    table[:, 7] = ord(",")
    return table.tobytes()[:-1]


def _records(count: int, rng: np.random.Generator, message: Callable[[int], bytes]) -> bytes:
    tags = rng.integers(0, 1 << 60, size=count)
    return b",".join(
        b'{"time":0,"level":"INFO","logger":"%x","message":"%s"}' % (int(tag), message(i))
        for i, tag in enumerate(tags)
    )


def _document(shape: str, count: int, rng: np.random.Generator) -> bytes:
    if shape == "integer values":
        return _snapshot(runs=_RUN % (_digits(count, rng), _digits(count, rng)))
    if shape == "log records":
        return _snapshot(logs=_records(count, rng, lambda i: b""))
    astral = "\U0001f600".encode()
    return _snapshot(logs=_records(count, rng, lambda i: astral * 16))


def worst_history(path: Path, limits: Limits, shape: str) -> Path:
    """A session file whose history is ``shape`` and takes the most the limits allow."""
    rng = np.random.default_rng(0)
    sample = 1000
    small = measure(_document(shape, sample, rng), limits.max_json_depth)
    empty = measure(_document(shape, 0, rng), limits.max_json_depth)
    per_memory = (small.parsed_bytes - empty.parsed_bytes) / sample
    per_byte = (small.size - empty.size) / sample
    room = min(
        (limits.max_json_memory - empty.parsed_bytes) / per_memory,
        (limits.max_json_bytes - empty.size) / per_byte,
    )
    text = _document(shape, int(room * 0.999), rng)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("manifest.json", manifest_bytes())
        archive.writestr("history/history.json", text)
    return path


def limits_argument(limits: Limits) -> str:
    """``limits`` as the JSON argument of :func:`main`."""
    return json.dumps(dataclasses.asdict(limits))
