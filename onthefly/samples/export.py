"""Export a selection to CSV, Parquet or JSON with pyarrow.

Columns: ``index`` (the dataset index), ``loss``, ``confidence``, ``variability``,
``correct``, ``margin``, ``count``, ``label``, then the sample's raw columns when the
dataset yields tensors or primitives (``item_0``, ``item_1``, … for tuples, the keys for
dicts; tensors of up to :data:`MAX_RAW_VALUES` values become lists). Statistics are read at
export time from the selection's split and source.

Paths are validated: the directory must exist, and the file name must be a bare name — a
name with a separator, ``..``, or that resolves (through links) outside the directory is
refused, so a crafted name cannot write elsewhere. A file already there is replaced only when
asked (``overwrite``).
"""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import torch

from onthefly.errors import ConfigurationError
from onthefly.protocol import FILE_EXISTS
from onthefly.samples.store import SampleView

FORMATS = {"csv": ".csv", "parquet": ".parquet", "json": ".json"}
MAX_RAW_VALUES = 4096
"""A raw tensor with more values than this is left out of the export."""


def target_path(directory: str | Path, name: str, fmt: str) -> Path:
    """The validated output path ``directory/name`` (the format's suffix added if missing).

    Raises:
        ConfigurationError: an unknown format, a relative or missing directory, or a name
            that is not a bare file name inside it.
        OSError: the file system could not look the path up (e.g. a name too long).

    Example:
        >>> target_path("/tmp", "hard", "csv")
        PosixPath('/tmp/hard.csv')
    """
    if fmt not in FORMATS:
        raise ConfigurationError(f"format {fmt!r}; expected one of {', '.join(FORMATS)}")
    folder = Path(directory)
    if not folder.is_absolute():
        raise ConfigurationError(
            f"directory {str(directory)!r} is relative; expected an absolute path"
        )
    if not folder.is_dir():
        raise ConfigurationError(f"directory {str(directory)!r} does not exist; expected a folder")
    bare = Path(name).name
    if not name or bare != name or name in (".", "..") or "\\" in name or "\x00" in name:
        raise ConfigurationError(
            f"file name {name!r} is not a bare file name; expected a name without a folder, "
            "e.g. 'hard.parquet'"
        )
    if not name.endswith(FORMATS[fmt]):
        name += FORMATS[fmt]
    path = folder / name
    try:
        root = folder.resolve()
        resolved = path.resolve()
    except RuntimeError as exc:  # a loop of links
        raise OSError(errno.ELOOP, f"{path} cannot be resolved ({exc})") from exc
    os.lstat(root)  # what the file system refuses (a name too long) is an OSError here
    if resolved.parent != root:
        raise ConfigurationError(f"{name!r} resolves outside {str(root)!r}; expected a file in it")
    return path


def table(view: SampleView, dataset: Any = None, classes: bool = False) -> pa.Table:
    """The export table of ``view``'s rows, with raw columns from ``dataset`` when it has them.

    Args:
        view: the rows to export (e.g. a selection's rows of its split).
        dataset: the split's map-style dataset, or ``None``.
        classes: the labels are class indices (written as integers).
    """
    columns: dict[str, Any] = {
        "index": pa.array(view.ids.astype(np.int64)),
        "loss": pa.array(view.loss, from_pandas=True),
        "confidence": pa.array(view.confidence, from_pandas=True),
        "variability": pa.array(view.variability, from_pandas=True),
        "correct": pa.array(view.correct, from_pandas=True),
        "margin": pa.array(view.margin, from_pandas=True),
        "count": pa.array(view.count.astype(np.int64)),
    }
    labels = view.label
    if classes and np.isfinite(labels).all():
        columns["label"] = pa.array(labels.astype(np.int64))
    else:
        columns["label"] = pa.array(labels, from_pandas=True)
    if dataset is not None:
        for key, values in raw_columns(dataset, view.ids).items():
            columns.setdefault(key, values)
    return pa.table(columns)


def raw_columns(dataset: Any, ids: np.ndarray) -> dict[str, pa.Array]:
    """The samples' raw fields as columns; empty when the dataset's items do not fit."""
    try:
        items = [dataset[int(i)] for i in ids]
    except (TypeError, IndexError, KeyError, NotImplementedError):
        return {}
    if not items:
        return {}
    first = items[0]
    if isinstance(first, Mapping):
        keys: list[Any] = list(first)
        names = [str(k) for k in keys]
    elif isinstance(first, Sequence) and not isinstance(first, (str, bytes)):
        keys = list(range(len(first)))
        names = [f"item_{k}" for k in keys]
    else:
        keys, names = [None], ["item"]
    columns: dict[str, pa.Array] = {}
    for key, name in zip(keys, names, strict=True):
        values = [_plain(item if key is None else item[key]) for item in items]
        if all(v is not _SKIP for v in values):
            try:
                columns[name] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                continue
    return columns


_SKIP = object()


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.numel() > MAX_RAW_VALUES:
            return _SKIP
        return value.item() if value.ndim == 0 else value.detach().cpu().reshape(-1).tolist()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.reshape(-1).tolist()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return _SKIP


def write(data: pa.Table, path: Path, fmt: str, overwrite: bool = False) -> int:
    """Write ``data`` to ``path`` in ``fmt``; returns the file's size in bytes.

    The file is written beside ``path`` and renamed over it, so whatever was at ``path`` (with
    ``overwrite``) is replaced, never written into: not a named pipe (which would block the
    training thread), not a file someone else planted there, not an earlier export (intact if
    this one fails).

    Raises:
        FileExistsError: something is at ``path`` and ``overwrite`` is false (its
            ``strerror`` ends in :data:`onthefly.protocol.FILE_EXISTS`).
        OSError: the file could not be written (full disk, no permission); nothing is left.
    """
    _refuse_existing(path, overwrite)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    temp = Path(name)
    try:
        if fmt == "parquet":
            pq.write_table(data, temp)
        elif fmt == "csv":
            flat = data.select([i for i, f in enumerate(data.schema) if not _nested(f.type)])
            pa_csv.write_csv(flat, temp)
        else:
            rows = [{k: _json_value(v) for k, v in row.items()} for row in data.to_pylist()]
            temp.write_text(json.dumps(rows, allow_nan=False), encoding="utf-8")
        _refuse_existing(path, overwrite)  # again: one may have appeared while writing
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def _refuse_existing(path: Path, overwrite: bool) -> None:
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, f"{path} {FILE_EXISTS}")


def _nested(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_struct(kind)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value
