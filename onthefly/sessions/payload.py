"""What a session file holds, gathered from a live trainer, and how it is written.

Layout of a session file (a zip)::

    manifest.json          Manifest (JSON, validated on open)
    state/model.pt         the model's state_dict
    state/trainer.pt       optimizers, schedulers, grad scaler, counters, callback states
                           (under Lightning: its checkpoint dict without the weights)
    state/rng.pt           RNG states at the export point, one per rank
    state/data.pt          the data position of each training loader
    history/history.json   the run's metrics, test results, log tail (the dashboard's view)
    files/...              everything features keep in the session's folder (e.g. Parquet)

Every ``.pt`` member holds tensors and plain containers only, so it loads with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning
import torch

from onthefly.drivers.base import TrainerHost
from onthefly.errors import SessionFileError
from onthefly.sessions.manifest import (
    DATA,
    FILES,
    HISTORY,
    MODEL,
    RNG,
    TRAINER,
    Driver,
    Manifest,
    Reason,
)
from onthefly.sessions.writer import ArchiveWriter

__all__ = [
    "DATA",
    "FILES",
    "HISTORY",
    "HISTORY_POINTS",
    "MODEL",
    "RNG",
    "TRAINER",
    "Payload",
    "write",
]

HISTORY_POINTS = 4_000_000
"""The most metric points an export's history keeps (longer series are min/max-decimated):
what the reader's default limits (:class:`~onthefly.sessions.archive.Limits`) take, so that
every exported file can be viewed and resumed."""


@dataclass
class Payload:
    """Everything one session file will hold.

    Attributes:
        manifest: identity and versions (its ``members`` are filled in when written).
        tensors: ``.pt`` members by name (model, trainer, rng, data).
        history: the dashboard's history as JSON, or ``None`` (checkpoint ring entries).
        folder: the session folder whose files go under ``files/``, or ``None``.
    """

    manifest: Manifest
    tensors: dict[str, Any]
    history: dict[str, Any] | None = None
    folder: Path | None = None
    skip: frozenset[str] = field(default_factory=frozenset)


def write(payload: Payload, path: Path, overwrite: bool = True) -> int:
    """Write ``payload`` to ``path`` atomically.

    Args:
        payload: what the file holds.
        path: the file.
        overwrite: replace a file already at ``path`` (else it is refused).

    Returns:
        The size of the file in bytes.

    Raises:
        SessionFileError: the file could not be written (e.g. the disk is full), or exists
            and ``overwrite`` is false; an earlier file at ``path`` is untouched.
    """
    with ArchiveWriter(path, overwrite) as writer:
        for name, obj in payload.tensors.items():
            writer.add_torch(name, obj)
        if payload.history is not None:
            writer.add_json(HISTORY, payload.history)
        for name, source in folder_files(payload.folder, payload.skip):
            writer.add_file(name, source)
        writer.commit(payload.manifest)
    return path.stat().st_size


def folder_files(folder: Path | None, skip: frozenset[str]) -> list[tuple[str, Path]]:
    """``(member name, file)`` for each file under ``folder``, except the top-level ``skip``."""
    if folder is None or not folder.is_dir():
        return []
    found = []
    for root, dirs, names in os.walk(folder):
        base = Path(root)
        if base == folder:
            dirs[:] = [d for d in dirs if d not in skip]
        for name in sorted(names):
            source = base / name
            if source.is_file() and not source.is_symlink():
                found.append((FILES + source.relative_to(folder).as_posix(), source))
    return found


def new_manifest(
    trainer: TrainerHost,
    *,
    project: str,
    run: str,
    run_name: str,
    driver: Driver,
    batch_in_epoch: int,
    reason: Reason,
    config: dict[str, Any],
) -> Manifest:
    """The manifest of a session file written from ``trainer`` now."""
    return Manifest(
        project=project,
        run=run,
        run_name=run_name,
        driver=driver,
        step=int(trainer.global_step),
        epoch=int(trainer.current_epoch),
        batch_in_epoch=batch_in_epoch,
        reason=reason,
        world_size=int(getattr(trainer, "world_size", 1)),
        trainer=config,
        torch_version=torch.__version__,
        lightning_version=lightning.__version__,
    )


def check_model(model_state: dict[str, Any], saved: Any, source: str) -> None:
    """Raise when ``saved`` (a state_dict from a file) does not fit ``model_state``.

    Raises:
        SessionFileError: lists the missing, unexpected and mis-shaped keys.
    """
    if not isinstance(saved, dict):
        raise SessionFileError(f"{source}: {MODEL} holds no state_dict")
    missing = sorted(set(model_state) - set(saved))
    unexpected = sorted(set(saved) - set(model_state))
    misshaped = sorted(
        f"{key} (file {tuple(saved[key].shape)}, model {tuple(model_state[key].shape)})"
        for key in model_state
        if key in saved
        and isinstance(saved[key], torch.Tensor)
        and isinstance(model_state[key], torch.Tensor)
        and saved[key].shape != model_state[key].shape
    )
    problems = [
        f"{label}: {_listed(keys)}"
        for label, keys in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("mis-shaped keys", misshaped),
        )
        if keys
    ]
    if problems:
        raise SessionFileError(
            f"{source} does not match this model ({'; '.join(problems)}); expected the same "
            "architecture as the exported run"
        )


def _listed(keys: list[str], limit: int = 10) -> str:
    shown = ", ".join(keys[:limit])
    return shown if len(keys) <= limit else f"{shown} … ({len(keys)} in all)"
