"""ForkSpawner: forks of a paused run, side-by-side comparison, merges, and the lineage.

Commands (all on the training thread; see ``docs/forks.md``):

* ``fork`` (paused runs only): a copy of the model trained on a slice of the training set
  for a budget, streaming into a child run, the parent untouched (:mod:`onthefly.forks.spawn`);
  optionally with batches of the rest replayed (:mod:`onthefly.forks.mixing`), and warned
  when the slice covers few classes (:mod:`onthefly.forks.coverage`);
* ``forks`` and ``lineage``: the forks of the session and the DAG of its models;
* ``compare``: the current model and forks evaluated on each fork's slice, the rest of the
  training set and the validation set (:mod:`onthefly.forks.compare`), beside copies of the
  model trained on for each fork's budget (:mod:`onthefly.forks.baselines`);
* ``merge`` (paused): the parent merged with forks (weights chosen on validation,
  :mod:`onthefly.forks.merge_grid`), loaded into the run's model in place unless it is worse
  on validation (:mod:`onthefly.forks.gate`), with a before/after report; ``discard_merge``
  undoes it while still paused (:mod:`onthefly.forks.merge_command`).

While a fork, a comparison or a merge runs, a ``cancel`` stops it and other commands wait
(:class:`~onthefly.forks.run.LongCommand`). In a distributed run of the native trainer these
commands run on rank 0 alone while the other ranks hold (a fork trains a plain copy of the
module on a slice of the whole dataset, with no collective); a merge or its discard then
copies rank 0's weights (and optimizer state when it changed) to every rank, in the same
control round (:func:`onthefly.forks.merge_command.replicate`). Distributed Lightning runs
are refused. The forks and the lineage are part of the callback's state, so session exports
keep them; the forks' weights are files in rank 0's session folder, which exports carry too.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from lightning.pytorch import Callback
from torch import nn

from onthefly._representable import check_command_values
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.forks import compare_command, merge_command
from onthefly.forks.adapters import add_adapters
from onthefly.forks.compare import Evaluator, Target
from onthefly.forks.coverage import narrow_slice
from onthefly.forks.host import MergeHistory
from onthefly.forks.lineage import Lineage
from onthefly.forks.mixing import replay_loader
from onthefly.forks.registry import ForkRecord, ForkRegistry
from onthefly.forks.run import LongCommand, Refused, RunParts, check_paused, run_parts
from onthefly.forks.slice_loader import batch_size_of, check_indices, subset_loader
from onthefly.forks.spawn import (
    Budget,
    ForkOutcome,
    fork_optimizer,
    model_copy,
    parent_untouched,
    train_fork,
)
from onthefly.forks.stream import ForkStream
from onthefly.protocol import (
    CancelReply,
    ForkReply,
    ForksReply,
    LineageBody,
    LineageView,
    StatusBody,
)
from onthefly.samples.commands import criterion_of
from onthefly.samples.selection import choose
from onthefly.samples.store import NoData

if TYPE_CHECKING:
    from onthefly.callbacks.sample_tracker import SampleTracker
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

Snapshot = Callable[..., Any]
"""``snapshot(trainer, reason)``: adds a snapshot to the checkpoint ring (before a merge)."""


def _answering(handler: Callable[..., None]) -> Callable[..., None]:
    """Turn the expected failures of a handler into protocol errors."""

    @functools.wraps(handler)
    def answer(self: ForkSpawner, boundary: Boundary, cmd: PendingCommand) -> None:
        try:
            handler(self, boundary, cmd)
        except Refused as exc:
            cmd.fail(exc.code, str(exc))
        except NoData as exc:
            cmd.fail("invalid_state", str(exc))
        except ConfigurationError as exc:
            cmd.fail("unsupported", str(exc))

    return answer


class ForkSpawner(Callback):
    """Forks, comparisons, merges and the lineage of a run.

    Args:
        session: the run's shared session (the commands are registered on it).
        inputs: returns what the user gave besides the trainer (loaders, loss function).
        tracker: the per-sample tracker, whose selections and statistics choose slices
            (``None``: forks take explicit ``indices`` only).
        snapshot: adds a checkpoint-ring snapshot (called with reason ``merge`` before a
            merge changes the model).

    Example:
        >>> from onthefly.callbacks.session import RunSession
        >>> spawner = ForkSpawner(RunSession("demo"))  # usually created by ``OnTheFly``
    """

    def __init__(
        self,
        session: RunSession,
        inputs: Callable[[], Any] = lambda: None,
        tracker: SampleTracker | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        self.session = session
        self.inputs = inputs
        self.tracker = tracker
        self.snapshot = snapshot
        self.registry = ForkRegistry(lambda: session.workdir)
        self.lineage = Lineage()
        self.merges = MergeHistory()
        for kind, handler in (
            ("fork", self._fork),
            ("forks", self._forks),
            ("compare", self._compare),
            ("merge", self._merge),
            ("discard_merge", self._discard_merge),
            ("lineage", self._lineage),
        ):
            session.commands.register(kind, handler)
        session.ranks.on_call(merge_command.REPLICATE, merge_command.replicate)
        if "cancel" not in session.commands:  # without a sample tracker, nobody answers it
            session.commands.register(
                "cancel", lambda boundary, cmd: cmd.reply(CancelReply(cancelled=False))
            )
        session.listen("status", self._on_status)

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        return {"forks": self.registry.state_dict(), "lineage": self.lineage.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.registry.load_state_dict(state_dict.get("forks", {}))
        self.lineage.load_state_dict(state_dict.get("lineage", {}))

    # ------------------------------------------------------------------ shared helpers

    def parts(self, trainer: TrainerHost) -> RunParts:
        """The run's model, optimizer, data and loss (see :func:`onthefly.forks.run.run_parts`)."""
        return run_parts(trainer, self.inputs())

    def paused(self, what: str) -> None:
        """Raise :class:`~onthefly.forks.run.Refused` unless the run is paused."""
        check_paused(self.session.state, what)

    def publish_lineage(self) -> None:
        server = self.session.server
        if server is not None:
            self.lineage.bind_main(server.main_run, self.session.run_name)
            server.publish(server.main_run, LineageBody(**self.lineage.to_json()))

    def taken_names(self) -> set[str]:
        """Names of forks and merges so far (both name files and runs)."""
        return self.lineage.names() | {r.name for r in self.registry}

    # ------------------------------------------------------------------ fork

    @_answering
    def _fork(self, boundary: Boundary, cmd: PendingCommand) -> None:
        command: Any = cmd.command
        trainer, session = boundary.trainer, self.session
        self.paused("a fork")
        parts = self.parts(trainer)
        check_command_values(parts.model.parameters(), lr=command.lr)
        indices, selection = self._slice(command, parts.train_size)
        name = self.registry.check_new(
            command.name or self.registry.next_name(), self.taken_names()
        )
        budget = Budget(command.steps, command.epochs)
        # A slice's epochs are short: workers started once per fork, not once per epoch.
        if command.replay > 0:
            loader = replay_loader(
                parts.train,
                indices,
                command.replay,
                batch_size=command.batch_size,
                persistent_workers=True,
            )
        else:
            loader = subset_loader(
                parts.train, indices, batch_size=command.batch_size, persistent_workers=True
            )
        warnings = [] if command.replay > 0 else self._coverage(indices)
        for warning in warnings:
            log.warning("fork %r: %s", name, warning)
        with parent_untouched():  # adapters draw their initial values
            model = model_copy(parts.model)
            adapters = add_adapters(model, command.adapter_rank) if command.adapter_rank else None
            optimizer = fork_optimizer(
                parts.optimizer, parts.model, model, command.optimizer, command.lr, adapters
            )
        server = session.server
        assert server is not None  # commands come from the server
        session.quiesce()  # the parent's steps reach the stream before the fork's
        step = int(trainer.global_step)
        self.lineage.bind_main(server.main_run, session.run_name)
        record = ForkRecord(
            name=name,
            run=server.add_run(name, parent=server.main_run),
            parent=self.lineage.active,
            parent_step=step,
            indices=indices,
            selection=selection,
            budget=budget.to_json(),
            hparams={
                "lr": float(optimizer.param_groups[0]["lr"]),
                "batch_size": batch_size_of(loader),
                "optimizer": command.optimizer,
                "adapter_rank": command.adapter_rank,
                "replay": command.replay,
            },
            warnings=warnings,
        )
        self.registry.add(record)
        node = self.lineage.add_fork(
            record.run,
            name,
            parent_step=step,
            selection=selection,
            budget=record.budget,
            hparams=record.hparams,
        )
        self.publish_lineage()
        interrupts = LongCommand(session, fork=name)
        try:
            publish = functools.partial(server.publish, record.run)
            accumulate = driver(trainer).accumulation()
            stream = ForkStream(
                publish, name, step, budget.total(loader, accumulate), interrupts.check
            )
            slice_target = [Target(name, "slice", "train", np.asarray(indices))]
            evaluator = parts.evaluator(slice_target, interrupts.check)
            record.parent_slice_loss = _slice_loss(evaluator, parts.model, name)
            outcome = train_fork(trainer, model, optimizer, loader, budget, stream)
            if outcome.status == "done":
                outcome = self._keep(record, model, outcome)
                record.slice_loss = _slice_loss(evaluator, model, name)
            record.status, record.steps = outcome.status, outcome.steps
            record.duration, record.message = outcome.duration, outcome.message
            node.update(
                status=record.status,
                steps=record.steps,
                slice_loss=record.slice_loss,
                parent_slice_loss=record.parent_slice_loss,
                message=record.message,
            )
            stream.progress(outcome.status, outcome.message)
            publish(
                StatusBody(
                    state="finished",
                    step=step + outcome.steps,
                    epoch=0,
                    reason=outcome.status
                    if outcome.message is None
                    else f"failed: {outcome.message}",
                )
            )
            self.publish_lineage()
            del model, optimizer
            _release_memory()
            cmd.reply(ForkReply(**record.summary(), **session.position(trainer)))
        finally:
            interrupts.replay(boundary)  # what came in meanwhile runs after the answer

    def _keep(self, record: ForkRecord, model: nn.Module, outcome: ForkOutcome) -> ForkOutcome:
        """Write the fork's weights; a fork whose weights cannot be written failed."""
        try:
            self.registry.save_weights(record, model)
        except OSError as exc:
            message = f"its weights could not be written: {exc}"
            return ForkOutcome("failed", outcome.steps, outcome.duration, message)
        return outcome

    def _coverage(self, indices: list[int]) -> list[str]:
        """The warnings about the classes a slice covers (none without class labels)."""
        if self.tracker is None:
            return []
        self.tracker.sync()
        try:
            view = self.tracker.store.view("train", "training")
        except NoData:
            return []
        if not np.isfinite(view.correct).any():  # no class targets: nothing to count
            return []
        rows = view.positions(np.asarray(indices, dtype=np.int64))
        warning = narrow_slice(view.label[rows], view.label)
        return [] if warning is None else [warning]

    def _slice(self, command: Any, size: int) -> tuple[list[int], dict[str, Any]]:
        """The fork's dataset indices and how they were chosen."""
        if command.indices is not None:
            ids = check_indices(command.indices, size)
            return ids, {"name": None, "criterion": {"kind": "indices"}, "size": len(ids)}
        tracker = self.tracker
        if tracker is None:
            raise Refused(
                "unsupported",
                "this run does not track per-sample losses (track_samples=False), so there are "
                "no selections; expected explicit indices",
            )
        if command.selection is not None:
            chosen = tracker.selections.get(command.selection)
            if chosen.split != "train":
                raise ConfigurationError(
                    f"the selection {chosen.name!r} holds {chosen.split} samples; a fork trains on "
                    "the training set: expected a selection of the train split"
                )
            ids = check_indices(chosen.ids.tolist(), size)
            return ids, {"name": chosen.name, "criterion": chosen.criterion, "size": len(ids)}
        tracker.sync()
        view = tracker.store.view("train", command.source)
        criterion = criterion_of(command)
        rows, _ = choose(view, criterion)
        ids = check_indices(view.ids[rows].tolist(), size)
        return ids, {"name": None, "criterion": criterion.describe(), "size": len(ids)}

    # ------------------------------------------------------------------ queries

    def _forks(self, boundary: Boundary, cmd: PendingCommand) -> None:
        cmd.reply(ForksReply.model_validate({"forks": self.registry.summaries()}))

    def _lineage(self, boundary: Boundary, cmd: PendingCommand) -> None:
        server = self.session.server
        if server is not None:
            self.lineage.bind_main(server.main_run, self.session.run_name)
        cmd.reply(LineageView(**self.lineage.to_json()))

    # ------------------------------------------------------------------ compare and merge

    @_answering
    def _compare(self, boundary: Boundary, cmd: PendingCommand) -> None:
        compare_command.compare(self, boundary, cmd)

    @_answering
    def _merge(self, boundary: Boundary, cmd: PendingCommand) -> None:
        merge_command.merge(self, boundary, cmd)

    @_answering
    def _discard_merge(self, boundary: Boundary, cmd: PendingCommand) -> None:
        merge_command.discard(self, boundary, cmd)

    def _on_status(self, events: list[dict[str, Any]]) -> None:
        # Training on from a merge makes it permanent: its undo state is dropped.
        if any(event.get("state") == "running" for event in events):
            self.merges.forget()


def _slice_loss(evaluator: Evaluator | None, model: nn.Module, name: str) -> float | None:
    """The model's mean loss on the fork's slice; ``None`` when it cannot be evaluated (no
    loss function, cancelled, a model the scan cannot call): the fork goes on without it."""
    if evaluator is None:
        return None
    try:
        scores = evaluator.scores(model)
    except Exception as exc:  # an aid for the report, never a reason to fail the fork
        log.warning("the loss of fork %r on its slice could not be evaluated: %s", name, exc)
        return None
    return None if scores is None else scores[name].loss


def _release_memory() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
