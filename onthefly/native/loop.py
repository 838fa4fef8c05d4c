"""The fit loop: epochs of batches, validation at the end of an epoch, in Lightning's hook order.

::

    on_fit_start
      on_train_start
        on_train_epoch_start                              (per epoch)
          on_train_batch_start -> step -> on_train_batch_end   (per batch)
          [epoch scheduler step] [validation: on_validation_*]
        on_train_epoch_end
      on_train_end
    on_fit_end

``trainer.should_stop`` and ``max_steps`` are checked before every batch, ``max_epochs`` before
every epoch, as Lightning does; so a callback may raise ``max_epochs`` mid-run to extend it. An
epoch whose loader yields no batch at all is a :class:`~onthefly.errors.ConfigurationError`:
with ``max_steps`` alone it would otherwise never end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from typing import Any, Protocol

from torch.optim.lr_scheduler import ReduceLROnPlateau

from onthefly.dataloaders import release_workers
from onthefly.distributed.sharding import set_sampler_epoch
from onthefly.errors import ConfigurationError
from onthefly.native.device import to_device
from onthefly.native.evaluation import loader_suffix
from onthefly.native.hooks import Hooks
from onthefly.native.metrics import StageMetrics
from onthefly.native.progress import ProgressBar
from onthefly.native.state import StepState
from onthefly.native.step import checked_output
from onthefly.sessions.data_position import TrackedLoader


class LoopHost(Protocol):
    """The trainer as its fit loop sees it: the public attributes it reads and advances."""

    current_epoch: int
    global_step: int
    should_stop: bool
    callback_metrics: dict[str, Any]
    train_loader: Iterable[Any] | None
    val_loaders: list[Iterable[Any]]
    scheduler: Any
    scheduler_interval: str


@dataclass(frozen=True)
class LoopContext:
    """What the fit loop gets besides its trainer's public attributes; ``fit`` makes it.

    Attributes:
        hooks: calls the callbacks' hooks.
        progress: the progress bar.
        metrics: the run's torchmetrics per stage.
        state: what the steps get besides the batch.
        training_step: the training step (the default one or the user's).
        validation_due: whether the epoch that ends now is validated.
        validate: runs the validation (its ``on_validation_*`` hooks included).
    """

    hooks: Hooks
    progress: ProgressBar
    metrics: StageMetrics
    state: StepState
    training_step: Callable[[Any, StepState], Any]
    validation_due: Callable[[], bool]
    validate: Callable[[], object]


def _length(loader: Iterable[Any]) -> int | None:
    if isinstance(loader, Sized):
        try:
            return len(loader)
        except TypeError:  # an IterableDataset behind a DataLoader has no length
            return None
    return None


class FitLoop:
    """Runs ``fit``; its limits are read live, so they can change while it runs.

    Attributes:
        max_epochs: stop after this many epochs (``None``: no epoch limit).
        max_steps: stop after this many optimizer steps (``-1``: no step limit).
    """

    def __init__(self, trainer: LoopHost, max_epochs: int | None, max_steps: int) -> None:
        self.trainer = trainer
        self.max_epochs = max_epochs
        self.max_steps = max_steps

    @property
    def steps_done(self) -> bool:
        """Whether ``max_steps`` optimizer steps have been taken."""
        return self.max_steps != -1 and self.trainer.global_step >= self.max_steps

    @property
    def done(self) -> bool:
        """Whether training is over: a limit reached, or ``trainer.should_stop`` set."""
        trainer = self.trainer
        epochs_done = self.max_epochs is not None and trainer.current_epoch >= self.max_epochs
        return epochs_done or self.steps_done or trainer.should_stop

    def run(self, context: LoopContext) -> None:
        """Train until :attr:`done`.

        Args:
            context: the parts ``fit`` set up for this run.
        """
        trainer = self.trainer
        hooks = context.hooks
        with hooks.paired("fit"), hooks.paired("train"):
            while not self.done:
                self._run_epoch(context)
                trainer.current_epoch += 1

    def _run_epoch(self, context: LoopContext) -> None:
        trainer = self.trainer
        loader = trainer.train_loader
        assert loader is not None
        # As Lightning does: a DistributedSampler draws a new order per epoch.
        set_sampler_epoch(loader, trainer.current_epoch)
        context.progress.start_epoch(trainer.current_epoch, _length(loader))
        with context.hooks.paired("train_epoch"):
            completed = self._run_batches(loader, context)
            context.progress.close()
            trainer.callback_metrics.update(context.metrics.compute("train"))
            scheduler = trainer.scheduler
            per_epoch = scheduler is not None and trainer.scheduler_interval == "epoch"
            if completed and per_epoch and not isinstance(scheduler, ReduceLROnPlateau):
                scheduler.step()
            if context.validation_due() and (completed or trainer.should_stop):
                context.validate()
                if isinstance(scheduler, ReduceLROnPlateau):
                    # With several validation loaders, the first one's loss (documented).
                    first = "val_loss" + loader_suffix(0, len(trainer.val_loaders))
                    scheduler.step(trainer.callback_metrics[first])

    def _run_batches(self, loader: Iterable[Any], context: LoopContext) -> bool:
        """Run the epoch's batches; ``True`` when the epoch ran to its end.

        The iterator is read until it raises ``StopIteration``, as a ``for`` loop reads it:
        a sampler with its own generator draws from it once more when it runs out (a
        ``RandomSampler`` draws the permutation tail), and stopping at ``len(loader)``
        instead would shift every later epoch's order away from a hand-written loop's.
        """
        total = _length(loader)
        batches = iter(loader)
        # An iterator resumed mid-epoch (onthefly.sessions) says which batch it starts at.
        batch_idx = getattr(batches, "start_batch", 0)
        try:
            while not (self.trainer.should_stop or self.steps_done):
                try:
                    batch = next(batches)
                except StopIteration:
                    return self._not_empty(batch_idx)
                if not self._run_batch(batch, batch_idx, context):
                    return False  # ended at the batch's start: it was not trained on
                batch_idx += 1
        except BaseException:
            # An epoch cut short by an exception (Ctrl+C included) leaves its iterator alive
            # in the traceback, workers and all: stop them now, as Lightning does, so that a
            # worker dying meanwhile cannot make torch's SIGCHLD handler raise in the cleanup.
            # (``inner``: the user's iterator, when onthefly.sessions tracks the epoch.)
            release_workers(getattr(batches, "inner", batches), TrackedLoader.unwrap(loader))
            raise
        return batch_idx == total

    def _not_empty(self, batches: int) -> bool:
        """``True`` (the epoch is complete), unless it had no batch from its start."""
        if batches:
            return True
        raise ConfigurationError(
            f"the training loader yielded no batch in epoch {self.trainer.current_epoch}; "
            "expected at least one (is the dataset empty, or smaller than a batch with "
            "drop_last=True? an iterator or generator is used up after one epoch: pass a "
            "DataLoader or a list, which can be iterated every epoch)"
        )

    def _run_batch(self, raw: Any, batch_idx: int, context: LoopContext) -> bool:
        """Train on one batch; ``False`` when a batch-start hook ended the epoch instead."""
        trainer = self.trainer
        state = context.state
        batch = to_device(raw, state.device)
        state.step, state.epoch, state.batch_idx = (
            trainer.global_step,
            trainer.current_epoch,
            batch_idx,
        )
        steps_before = trainer.global_step
        # The batch's hooks called here directly (see StepHooks). If the step raises, the end
        # hook is skipped, as in Lightning (the exception goes to on_exception instead).
        hooks = context.hooks.for_batch()
        model = hooks.model
        try:
            for hook in hooks.train_batch_start:
                hook(trainer, model, batch, batch_idx)
        except StopIteration:
            # As Lightning's epoch loop (2.6) does: a batch-start hook that raises it ends the
            # epoch before the step (e.g. a stop that came while the run waited there).
            return False
        outputs = checked_output(context.training_step(batch, state), "training")
        trainer.callback_metrics.update(outputs)
        # Per-step schedules follow real optimizer steps (none while accumulating).
        stepped = trainer.global_step > steps_before
        if stepped and trainer.scheduler is not None and trainer.scheduler_interval == "step":
            trainer.scheduler.step()
        for hook in hooks.train_batch_end:
            hook(trainer, model, outputs, batch, batch_idx)
        if context.progress.enabled:
            context.progress.advance(trainer.global_step, outputs["loss"])
        return True
