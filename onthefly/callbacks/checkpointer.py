"""Checkpointer: export a session to a file, resume from one, and keep the checkpoint ring.

Commands (all run on the training thread at a batch boundary):

* ``export`` (path): write the whole session (weights, optimizers, schedulers, scaler, RNG,
  data position, callback states, history and the session folder's files) to a ``.otf``.
* ``snapshot``: add a snapshot to the checkpoint ring now; ``checkpoints`` lists the ring.
* ``restore`` (id) and ``import`` (path), at a pause: load the model, optimizer, scheduler
  and grad scaler state of a ring entry or a session file into the live run. The step and
  epoch counters, the data position, the RNG and the callback states are left as they are:
  the run goes on from where it is paused, with the loaded weights.

The ring also takes a snapshot whenever the run pauses or starts a test. With
``resume_from`` the run starts where the file left off (see :mod:`onthefly.sessions.resume`),
and the dashboard shows the file's history before the new steps.

The batches of the epoch trained on so far are counted by the run's
:class:`~onthefly.callbacks._recorder.Recorder`, before the gate runs commands at a batch.

In a distributed run ``export`` reaches every rank at the same control round: each rank
sends rank 0 its RNG state, data position and cursor, and rank 0 writes the file (weights,
optimizers and callback states are rank 0's: DDP keeps them equal). ``import`` and
``restore`` are refused there (every rank would have to load the same file); resume from
a session file instead.
"""

from __future__ import annotations

import logging
import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.errors import SessionFileError
from onthefly.protocol import CheckpointEntry, CheckpointsReply, ExportReply, LoadReply, Snapshot
from onthefly.sessions import loaders, payload, resume, rng, training_state
from onthefly.sessions.archive import SessionArchive
from onthefly.sessions.manifest import Reason
from onthefly.sessions.ring import CheckpointRing, Entry
from onthefly.sessions.writer import export_path

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

RING_FOLDER = "checkpoints"
_SNAPSHOT_ON = {"paused": "pause", "testing": "test"}


class Checkpointer(Callback):
    """Session files and the checkpoint ring of one run.

    Args:
        session: the run's shared session (its commands are registered on it).
        recorder: the run's per-batch recorder (it counts the batches trained on).
        resume_from: a session file to continue from (Lightning; the native trainer takes
            ``fit(resume_from=...)``).
        checkpoints: snapshots kept in the ring (``0``: none, and no snapshot on pause).
        checkpoint_bytes: most disk space the ring may use.

    Example:
        >>> session = RunSession("demo")  # usually created by ``OnTheFly``
        >>> checkpointer = Checkpointer(session, Recorder(session, StepClock()))
    """

    def __init__(
        self,
        session: RunSession,
        recorder: Recorder,
        resume_from: str | os.PathLike[str] | None = None,
        checkpoints: int = 3,
        checkpoint_bytes: int = 2 << 30,
    ) -> None:
        self.session = session
        self.resume_from = resume_from
        self.ring = CheckpointRing(Path(RING_FOLDER), checkpoints, checkpoint_bytes)
        self._recorder = recorder
        self._trainer: Any = None
        self._requested: loaders.Requested | None = None
        self._stop_listening: Callable[[], None] | None = None
        self._saved: resume.SavedState | None = None
        for kind, handler in (
            ("export", self._on_export),
            ("import", self._on_import),
            ("checkpoints", self._on_checkpoints),
            ("restore", self._on_restore),
            ("snapshot", self._on_snapshot),
        ):
            session.commands.register(kind, handler)
        session.listen("status", self._on_status)

    # ------------------------------------------------------------------ lifecycle

    def setup(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        self._trainer = trainer
        workdir = self.session.workdir
        # Also on exits that skip teardown; RunSession.close removes it in the normal case.
        weakref.finalize(self, shutil.rmtree, str(workdir), True)
        self.ring.folder = workdir / RING_FOLDER
        # Lightning creates the first epoch's iterator itself: its start state is taken when
        # the loaders are requested, before that iterator draws anything.
        self._stop_listening = driver(trainer).on_train_loaders_requested(self._on_loaders)
        # The native trainer's fit(resume_from=...) has restored the run already.
        given = driver(trainer).resume_from()
        path = self.resume_from or given
        if path is None:
            return
        if given is None:
            self._saved = resume.read(path)
            resume.restore(trainer, self._saved)
        self._load_history(Path(path), workdir)

    def on_train_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        loaders.track(trainer, self._requested, self.session.inbox)
        if self._saved is not None:
            resume.arm(trainer, self._saved)
            self._saved = None

    def on_train_epoch_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        # Lightning may have reloaded the loaders
        loaders.track(trainer, self._requested, self.session.inbox)
        # Native: the recorder tells these iterators the batches trained, so that fetches up
        # to there keep no RNG state (see data_position).
        self._recorder.count_fetches(
            [] if driver(trainer).fetches_ahead else loaders.tracked(trainer)
        )

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._release(trainer)
            self._recorder.count_fetches([])

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._release(trainer)  # Lightning calls no teardown hook after an exception

    # ------------------------------------------------------------------ public API

    def export(
        self, trainer: TrainerHost, path: str | os.PathLike[str], overwrite: bool = False
    ) -> dict[str, Any]:
        """Write the session to ``path`` now (call at a batch boundary, e.g. from a callback).

        Args:
            trainer: the trainer driving the run.
            path: the file; ``.otf`` is appended when missing.
            overwrite: replace a file already at ``path`` (else it is refused).

        Returns:
            ``{"path", "size", "step", "epoch"}`` of the written file.

        Raises:
            SessionFileError: an invalid path, a file already there (without ``overwrite``),
                or the file could not be written (the run is unaffected and an earlier file
                of that name is untouched).
        """
        ranks = None
        sync = self.session.ranks
        if sync.group is not None:  # first, before anything can fail on one rank only
            what = "export's gathering of every rank's RNG state and data position"
            ranks = sync.group.gather(self._rank_state(trainer), what)
            if ranks is None:
                return {}  # rank 0 writes the file and answers
        target = export_path(path, overwrite)
        self.session.quiesce()  # buffered telemetry first, so the history is complete
        written = self._payload(trainer, "export", history=True, ranks=ranks)
        size = payload.write(written, target, overwrite)
        log.info("session exported to %s (%d bytes)", target, size)
        return {
            "path": str(target),
            "size": size,
            "step": int(trainer.global_step),
            "epoch": int(trainer.current_epoch),
        }

    def snapshot(self, trainer: TrainerHost, reason: Reason) -> Entry | None:
        """Add a snapshot to the ring (e.g. before a fork or a merge).

        Returns:
            The ring entry, or ``None`` when the ring keeps nothing or it was too large.
        """
        self.ring.folder = self.session.workdir / RING_FOLDER
        return self.ring.add(
            int(trainer.global_step),
            int(trainer.current_epoch),
            reason,
            lambda path: payload.write(self._payload(trainer, reason, history=False), path),
        )

    # ------------------------------------------------------------------ internals

    def _on_loaders(self, requested: Any) -> None:
        self._requested = loaders.Requested.take(requested)

    def _release(self, trainer: TrainerHost) -> None:
        loaders.release(trainer)
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None

    def _rank_state(self, trainer: TrainerHost) -> dict[str, Any]:
        """This rank's RNG state, data position and cursor, for rank 0's export."""
        trained = self._trained_batches(trainer)
        return {
            "rng": rng.capture(),
            "positions": [p.to_state() for p in loaders.positions(trainer, trained)],
            "cursor": self.session.ranks.cursor(trainer, trained).to_json(),
        }

    def _payload(
        self,
        trainer: TrainerHost,
        reason: Reason,
        history: bool,
        ranks: list[dict[str, Any]] | None = None,
    ) -> payload.Payload:
        model_state, rest = training_state.capture(trainer)
        trained = self._trained_batches(trainer)
        positions = loaders.positions(trainer, trained)
        server = self.session.server
        run = server.main_run if server is not None else (self.session.run_name or "run")
        manifest = payload.new_manifest(
            trainer,
            project=self.session.project,
            run=run,
            run_name=self.session.run_name or run,
            driver=driver(trainer).name,
            batch_in_epoch=trained,
            reason=reason,
            config=training_state.config(trainer),
        )
        saved_history = None
        if history and server is not None:
            snapshot = server.history_snapshot(max_total_points=payload.HISTORY_POINTS)
            if any(s.decimated for run in snapshot.runs for s in run.series.values()):
                log.warning(
                    "the run's history holds more than %d points: the exported file keeps "
                    "them min/max-decimated, so that it can be read back",
                    payload.HISTORY_POINTS,
                )
            saved_history = snapshot.model_dump(mode="json")
        return payload.Payload(
            manifest=manifest,
            tensors={
                payload.MODEL: model_state,
                payload.TRAINER: rest,
                payload.RNG: {"ranks": [r["rng"] for r in ranks] if ranks else [rng.capture()]},
                payload.DATA: {
                    "loaders": [p.to_state() for p in positions],
                    **({} if ranks is None else _per_rank_positions(ranks)),
                },
            },
            history=saved_history,
            folder=self.session.workdir if history else None,
            skip=frozenset({RING_FOLDER}),
        )

    def _trained_batches(self, trainer: TrainerHost) -> int:
        """Batches of the current epoch trained on so far."""
        return driver(trainer).trained_batches(self._recorder.trained)

    def _load_history(self, path: Path, workdir: Path) -> None:
        with SessionArchive(path) as archive:
            archive.extract(payload.FILES, workdir)
            if payload.HISTORY not in archive.names() or self.session.server is None:
                return
            saved = archive.read_model(payload.HISTORY, Snapshot)
        server = self.session.server
        # The file's main run becomes this run's past: same charts, continued.
        runs = list(saved.runs)
        main = next((i for i, r in enumerate(runs) if r.parent is None), None)
        if main is not None:
            runs[main] = runs[main].model_copy(update={"run": server.main_run, "state": "running"})
        server.preload(saved.model_copy(update={"runs": runs}))

    def _on_status(self, events: list[dict[str, Any]]) -> None:
        if self._trainer is None or self.ring.capacity == 0:
            return
        for event in events:
            reason = _SNAPSHOT_ON.get(event.get("state", ""))
            if reason is None:
                continue
            try:
                self.snapshot(self._trainer, reason)  # type: ignore[arg-type]
            except (SessionFileError, OSError, RuntimeError) as exc:
                log.warning("the checkpoint ring could not take a %s snapshot: %s", reason, exc)

    def _on_export(self, boundary: Boundary, cmd: PendingCommand) -> None:
        try:
            command: Any = cmd.command
            result = self.export(boundary.trainer, command.path, command.overwrite)
        except SessionFileError as exc:
            cmd.fail("file_error", str(exc))
            return
        cmd.reply(ExportReply(**result))

    def _on_import(self, boundary: Boundary, cmd: PendingCommand) -> None:
        path = cmd.command.path  # type: ignore[union-attr]
        self._load_into(boundary, cmd, Path(path).expanduser(), f"session file {path}")

    def _on_restore(self, boundary: Boundary, cmd: PendingCommand) -> None:
        entry_id = cmd.command.checkpoint  # type: ignore[union-attr]
        path = self.ring.path(entry_id)
        if path is None:
            known = ", ".join(e.id for e in self.ring.entries()) or "none"
            cmd.fail("invalid_state", f"no checkpoint {entry_id!r}; expected one of: {known}")
            return
        self._load_into(boundary, cmd, path, f"checkpoint {entry_id}")

    def _load_into(self, boundary: Boundary, cmd: PendingCommand, path: Path, what: str) -> None:
        trainer = boundary.trainer
        if self.session.ranks.active:
            cmd.fail(
                "unsupported",
                f"loading a {what} into a distributed run is not supported: every rank would "
                "have to load it at the same step; export, then resume every rank from the file "
                "(fit(resume_from=...) or OnTheFly(resume_from=...))",
            )
            return
        if self.session.state != "paused":
            cmd.fail(
                "invalid_state",
                f"loading a {what} needs a paused run; pause it first (`onthefly pause`)",
            )
            return
        try:
            saved = resume.read(path)
            training_state.load_learned(trainer, saved.model, saved.rest, str(path))
        except SessionFileError as exc:
            cmd.fail("file_error", str(exc))
            return
        log.warning(
            "loaded the model, optimizer, scheduler and scaler state of %s (step %d) at step %d",
            what,
            saved.manifest.step,
            trainer.global_step,
        )
        cmd.reply(
            LoadReply(
                **self.session.position(trainer),
                loaded=what,
                loaded_step=saved.manifest.step,
                loaded_epoch=saved.manifest.epoch,
            )
        )

    def _on_checkpoints(self, boundary: Boundary, cmd: PendingCommand) -> None:
        cmd.reply(
            CheckpointsReply(
                checkpoints=[CheckpointEntry(**e.to_json()) for e in self.ring.entries()],
                capacity=self.ring.capacity,
                max_bytes=self.ring.max_bytes,
            )
        )

    def _on_snapshot(self, boundary: Boundary, cmd: PendingCommand) -> None:
        try:
            entry = self.snapshot(boundary.trainer, "request")
        except SessionFileError as exc:
            cmd.fail("file_error", str(exc))
            return
        if entry is None:
            cmd.fail(
                "unsupported",
                "the checkpoint ring keeps nothing (checkpoints=0) or the snapshot is larger "
                "than checkpoint_bytes",
            )
            return
        cmd.reply(CheckpointEntry(**entry.to_json()))


def _per_rank_positions(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The data position and cursor of every rank (``state/data.pt``'s ``ranks``, ``cursors``)."""
    return {
        "ranks": [r["positions"] for r in ranks],
        "cursors": [r["cursor"] for r in ranks],
    }
