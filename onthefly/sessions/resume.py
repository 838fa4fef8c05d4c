"""Continuing a run from a session file in a new process, bit for bit.

:func:`read` opens and checks the file (structure, manifest, model shapes later) and loads
its state members with ``weights_only=True``. :func:`restore` hands the training state to the
trainer's driver and :func:`arm` sets the training loaders to recreate the exported epoch's
iterator at the exported batch with the RNG states of the export point:

* native (:func:`resume_native`, called by ``onthefly.Trainer.fit(resume_from=...)``): the
  model, optimizer, scheduler, grad scaler, step and epoch counters and callback states are
  restored at once, and the loader armed;
* Lightning (:func:`restore` at ``setup``, :func:`arm` at ``on_train_start``): the file's
  checkpoint dict goes to Lightning's checkpoint connector, which restores exactly what
  ``trainer.fit(ckpt_path=...)`` would; the data position and RNG states, which Lightning
  lacks, are restored when training starts.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.errors import SessionFileError
from onthefly.sessions import loaders
from onthefly.sessions.archive import SessionArchive
from onthefly.sessions.data_position import DataPosition
from onthefly.sessions.manifest import Manifest
from onthefly.sessions.payload import DATA, MODEL, RNG, TRAINER, check_model
from onthefly.sessions.rng import RngState

log = logging.getLogger(__name__)


@dataclass
class SavedState:
    """A session file's training state, loaded and checked.

    Attributes:
        path: the file.
        manifest: its manifest.
        model: the model's state_dict.
        rest: everything else (see :mod:`onthefly.sessions.training_state`).
        rng: the RNG states at the export point, one per rank.
        positions: one data position per training loader (rank 0's).
        rank_positions: every rank's data positions (distributed exports; else empty).
    """

    path: Path
    manifest: Manifest
    model: dict[str, Any]
    rest: dict[str, Any]
    rng: list[RngState]
    positions: list[DataPosition]
    rank_positions: list[list[DataPosition]] = field(default_factory=list)

    def rng_for(self, rank: int) -> RngState:
        """The RNG state of ``rank`` (rank 0's when the file has fewer ranks)."""
        return self.rng[rank] if rank < len(self.rng) else self.rng[0]

    def positions_for(self, rank: int) -> list[DataPosition]:
        """The data positions of ``rank`` (rank 0's when the file has fewer ranks)."""
        if rank < len(self.rank_positions):
            return self.rank_positions[rank]
        return self.positions

    def check_world(self, world_size: int) -> None:
        """Warn when the file was written by another number of ranks than resume it."""
        written = self.manifest.world_size
        if written != world_size:
            log.warning(
                "%s was exported by %d rank(s) and resumes on %d: weights, optimizer and "
                "counters are restored, but the data position and random state are exact only "
                "with the same number of ranks",
                self.path,
                written,
                world_size,
            )


def read(path: str | os.PathLike[str]) -> SavedState:
    """Open ``path`` and load its training state (``weights_only``; nothing is executed).

    Raises:
        SessionFileError: see :class:`~onthefly.sessions.archive.SessionArchive`.
    """
    with SessionArchive(path) as archive:
        model = archive.load_torch(MODEL)
        rest = archive.load_torch(TRAINER)
        rng = archive.load_torch(RNG)
        data = archive.load_torch(DATA)
        manifest = archive.manifest
    try:
        positions = [DataPosition.from_state(state) for state in data["loaders"]]
        per_rank = [
            [DataPosition.from_state(state) for state in states] for states in data.get("ranks", [])
        ]
        ranks = list(rng["ranks"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SessionFileError(f"{path}: {RNG} or {DATA} is malformed ({exc})") from None
    if not isinstance(rest, dict) or not ranks:
        raise SessionFileError(f"{path}: {TRAINER} or {RNG} is malformed")
    return SavedState(Path(path), manifest, model, rest, ranks, positions, per_rank)


def resume_native(trainer: TrainerHost, path: str | os.PathLike[str]) -> SavedState:
    """Restore an ``onthefly.Trainer`` from ``path`` before its loop starts.

    Raises:
        SessionFileError: unreadable file, written by Lightning, or a model that does not
            match.
    """
    saved = read(path)
    restore(trainer, saved)
    arm(trainer, saved)
    return saved


def restore(trainer: TrainerHost, saved: SavedState) -> None:
    """Hand the file's training state to the trainer's driver (native: restored at once;
    Lightning, at ``setup`` of stage ``fit``: restored by Lightning's checkpoint connector
    exactly as from ``ckpt_path``).

    Raises:
        SessionFileError: written by the other driver, or a state that does not fit.
    """
    run = driver(trainer)
    _expect_driver(saved, run.name)
    check_model(trainer.lightning_module.state_dict(), saved.model, str(saved.path))
    run.restore(saved.model, saved.rest, f"{saved.path}: {TRAINER}")


def arm(trainer: TrainerHost, saved: SavedState) -> None:
    """Arm the training loaders to recreate the exported epoch's iterator at the exported
    batch with the RNG states of the export point (Lightning: at ``on_train_start``, after
    :func:`~onthefly.sessions.loaders.track`)."""
    rank = trainer.global_rank
    saved.check_world(trainer.world_size)
    loaders.resume(trainer, saved.positions_for(rank), saved.rng_for(rank))


def _expect_driver(saved: SavedState, driver: str) -> None:
    if saved.manifest.driver == driver:
        return
    how = {
        "native": "onthefly.Trainer.fit(..., resume_from=...)",
        "lightning": "attach_lightning(..., resume_from=...) or OnTheFly(resume_from=...)",
    }
    raise SessionFileError(
        f"{saved.path} was exported from a {saved.manifest.driver} run; resume it with "
        f"{how[saved.manifest.driver]}"
    )
