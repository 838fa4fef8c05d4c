"""What a callback may ask of the trainer it runs in, whichever trainer that is.

Two trainers drive OnTheFly's callbacks: ``lightning.pytorch.Trainer`` and the native
:class:`onthefly.Trainer`. Both carry the plain attributes of :class:`TrainerHost` (step,
epoch, ``should_stop``, ranks, ``callback_metrics``, the module); everything else a callback
needs (limits, loaders, logged values, training state, an evaluation, a trained copy) it asks
of a :class:`Driver`, got with :func:`onthefly.drivers.driver`. The two drivers are the only
code that knows how the trainers differ.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import torch
from torch import nn
from torch.nn import Module
from torch.optim import Optimizer

from onthefly.drivers.values import Scalar

Split = Literal["train", "val", "test"]
UNLIMITED = -1


@runtime_checkable
class TrainerHost(Protocol):
    """The attributes a callback reads or writes on whichever trainer drives it; everything
    else it asks of the trainer's :class:`Driver`."""

    should_stop: bool

    @property
    def current_epoch(self) -> int: ...

    @property
    def global_step(self) -> int: ...

    @property
    def max_epochs(self) -> int | None: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def callback_metrics(self) -> Any: ...

    @property
    def is_global_zero(self) -> bool: ...

    @property
    def global_rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def sanity_checking(self) -> bool: ...

    @property
    def optimizers(self) -> Any: ...

    @property
    def lightning_module(self) -> Any: ...


@dataclass(frozen=True)
class Limits:
    """``max_epochs`` and ``max_steps``, each ``-1`` when there is none."""

    max_epochs: int
    max_steps: int


@dataclass(frozen=True)
class Budget:
    """Exactly one of ``steps`` (optimizer steps) or ``epochs`` (passes over the data)."""

    steps: int | None = None
    epochs: int | None = None

    def to_json(self) -> dict[str, int]:
        return (
            {"steps": self.steps} if self.steps is not None else {"epochs": int(self.epochs or 0)}
        )

    def total(self, loader: Sized, accumulate: int = 1) -> int | None:
        """The optimizer steps this budget makes over ``loader``."""
        if self.steps is not None:
            return self.steps
        return int(self.epochs or 0) * math.ceil(len(loader) / max(accumulate, 1))


Callbacks = Sequence[object]
"""Callbacks (Lightning's, or any objects with Lightning-named hook methods)."""

LoaderListener = Callable[[Any], None]
"""Called with the training loaders (any nesting) each time the trainer requests them."""


def distributed(trainer: Any) -> bool:
    """Whether the run has several ranks that must agree (the rounds in which they do are
    :class:`~onthefly.distributed.control.RankSync`'s)."""
    return int(getattr(trainer, "world_size", 1)) > 1


def as_limit(value: Any) -> int:
    """``value`` as a limit: ``-1`` for ``None`` or a negative number."""
    return UNLIMITED if value is None or value < 0 else int(value)


class Driver(ABC):
    """One trainer, as OnTheFly's callbacks see it.

    Attributes:
        trainer: the trainer driven (``lightning.pytorch.Trainer`` or ``onthefly.Trainer``).
        name: ``"lightning"`` or ``"native"`` (written into session files).
        fetches_ahead: the trainer fetches the next batch before the current one is trained
            on, so its iterators must keep every fetch's random state.
        values_in_outputs: see below.
        distributed_copies: a copy of the model (a fork) may be trained on rank 0 alone
            while the other ranks of a distributed run hold.

    Example:
        >>> from onthefly.drivers import driver
        >>> driver(trainer).limits()  # doctest: +SKIP
        Limits(max_epochs=3, max_steps=-1)
    """

    name: ClassVar[Literal["lightning", "native"]]
    fetches_ahead: ClassVar[bool]
    distributed_copies: ClassVar[bool]
    values_in_outputs: ClassVar[bool]
    """The values a step logs are the extra keys of its outputs (read at the step's end when
    it has some), rather than kept by the trainer until the next step (read at the step's
    end while :meth:`step_log` is truthy)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    # --- where the run stops --------------------------------------------------------------

    @abstractmethod
    def limits(self) -> Limits:
        """The run's current ``max_epochs`` / ``max_steps``."""

    @abstractmethod
    def set_limits(self, limits: Limits) -> None:
        """Change the limits of a running fit; the loop picks them up at its next check."""

    @abstractmethod
    def is_last_batch(self, batch_idx: int) -> bool:
        """Whether the batch that just ended is the last of its epoch."""

    @abstractmethod
    def trained_batches(self, counted: int) -> int:
        """Batches of the current epoch trained on; ``counted``: as a callback counted them."""

    @abstractmethod
    def step_counter(self) -> tuple[Any, str]:
        """``(holder, attribute)``: ``getattr(holder, attribute)`` is ``global_step`` for the
        rest of the fit, read without a call into the trainer (at every step)."""

    @abstractmethod
    def epoch_counter(self) -> tuple[Any, str]:
        """``(holder, attribute)``: ``getattr(holder, attribute)`` is ``current_epoch`` for the
        rest of the fit (as :meth:`step_counter`)."""

    @abstractmethod
    def terminating(self) -> bool:
        """Whether the trainer received a termination signal and ends the run after this step."""

    def request_stop(self) -> None:
        """Ask the trainer to stop at its next check (as ``EarlyStopping`` does)."""
        self.trainer.should_stop = True

    # --- what the user logs ---------------------------------------------------------------

    @abstractmethod
    def metric_snapshot(self) -> dict[str, int]:
        """Identity of each callback metric, to tell later which ones were replaced."""

    @abstractmethod
    def step_values(self, outputs: Any) -> dict[str, Scalar]:
        """The values logged during the training step that just ended, as device tensors.

        Args:
            outputs: what the step returned.
        """

    @abstractmethod
    def step_log(self) -> Any:
        """What is truthy right after a step that logged values which the trainer keeps only
        until the next step (then read :meth:`step_values` at once); ``None`` when the
        values are in the step's outputs (:attr:`values_in_outputs`)."""

    @abstractmethod
    def epoch_values(self, before: dict[str, int], skip: set[str]) -> dict[str, Scalar]:
        """The epoch-level training values (read at the epoch's end; may sync once).

        Args:
            before: :meth:`metric_snapshot` taken when the epoch started.
            skip: names already reported per step.
        """

    @abstractmethod
    def eval_values(self, before: dict[str, int]) -> dict[str, Scalar]:
        """The values a validation or test run logged, read at its end.

        Args:
            before: :meth:`metric_snapshot` taken when the evaluation started.
        """

    @abstractmethod
    def grad_norm(self) -> Scalar | None:
        """The trainer's own total gradient norm (before clipping) of the last step, if any."""

    @abstractmethod
    def computes_grad_norm(self) -> bool:
        """Whether :meth:`grad_norm` has the norm of every step (the trainer clips)."""

    @abstractmethod
    def scales_gradients(self) -> bool:
        """Whether a grad scaler may skip optimizer steps (mixed precision on CUDA)."""

    @abstractmethod
    def accumulation(self) -> int:
        """Micro-batches per optimizer step the trainer accumulates by itself (1: none, or
        done by the user's own step); it divides each micro-batch loss by this number."""

    # --- the run's parts ------------------------------------------------------------------

    @abstractmethod
    def loss_fn(self, inputs: Any) -> Any:
        """The run's loss function, or ``None``.

        Args:
            inputs: what the user handed over besides the trainer (``RunInputs``), or ``None``.
        """

    @abstractmethod
    def reports_loss_calls(self) -> bool:
        """Whether the trainer's own training step reports each call of the given loss
        function (:meth:`loss_fn`) for per-sample values itself
        (:func:`onthefly.samples.slot.observe`): a hook on it would only repeat the report,
        at a cost in every step."""

    @abstractmethod
    def schedulers(self) -> list[Any]:
        """The run's LR schedulers."""

    @abstractmethod
    def batch_keys(self) -> tuple[str, str] | None:
        """``(input_key, target_key)`` of dict batches the trainer was given, if any."""

    @abstractmethod
    def resume_from(self) -> Any:
        """The session file the trainer's ``fit`` resumed from itself, or ``None``."""

    @abstractmethod
    def loaders(self, split: Split, inputs: Any) -> list[Any]:
        """The user's loaders of ``split``, in order (several validation or test loaders are
        listed each; none: empty).

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.
            inputs: what the user handed over besides the trainer, or ``None``.
        """

    @abstractmethod
    def train_loaders(self) -> list[Any]:
        """The training loaders the fit loop iterates, as it holds them (wrappers included)."""

    @abstractmethod
    def replace_train_loaders(self, loaders: Sequence[Any]) -> None:
        """Put ``loaders`` (one per :meth:`train_loaders` entry) in place of the training ones."""

    @abstractmethod
    def live_train_iterators(self) -> list[Any] | None:
        """The iterators of the epoch in progress, one per training loader, replaceable in
        place; ``None`` where the trainer keeps none of its own."""

    @abstractmethod
    def restart_train_iterator(self) -> None:
        """Rebuild the epoch's iterator from the training loaders (after they were armed)."""

    @abstractmethod
    def run_loaders(self) -> list[Any]:
        """Every loader the run iterates (training, validation, test; those set up so far)."""

    @abstractmethod
    def on_train_loaders_requested(self, listener: LoaderListener) -> Callable[[], None] | None:
        """Call ``listener(loaders)`` (a list) whenever the fit loop requests its training
        loaders; where they were given to the trainer, at once.

        Returns:
            A function that stops listening; ``None`` when the trainer's data source cannot
            be reached.
        """

    # --- the training state ---------------------------------------------------------------

    @abstractmethod
    def capture_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(model state_dict, everything else)`` at a batch boundary."""

    @abstractmethod
    def load_learned(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        """Put model, optimizers, schedulers and grad scaler back; counters are left alone.

        Raises:
            SessionFileError: ``rest`` was written by the other driver.
        """

    @abstractmethod
    def restore(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        """Restore everything :meth:`capture_state` took: counters and callback states too.

        Raises:
            SessionFileError: ``rest`` does not fit this run.
        """

    def config(self) -> dict[str, Any]:
        """The trainer settings worth showing people (not used to restore)."""
        trainer = self.trainer
        return {
            "max_epochs": trainer.max_epochs,
            "max_steps": trainer.max_steps,
            "precision": str(trainer.precision),
            "accumulate_grad_batches": self.accumulation(),
            **self.placement(),
        }

    @abstractmethod
    def placement(self) -> dict[str, Any]:
        """``val_every_n_epochs`` and ``device`` as the trainer has them, for :meth:`config`."""

    # --- work besides training ------------------------------------------------------------

    @abstractmethod
    def run_test(self, label: str, source: Any) -> dict[str, Any]:
        """Evaluate the test data now, from a batch boundary, firing the ``on_test_*`` hooks.

        Args:
            label: a name for this evaluation.
            source: test data to use instead of the run's own (``None``: the run's).

        Raises:
            ConfigurationError: the run has nothing to test with.
        """

    @abstractmethod
    def loss_closure(self, module: nn.Module, batch_idx: int) -> Callable[[Any], torch.Tensor]:
        """``fn(batch) -> loss`` as the training step computes it, without stepping anything.

        Raises:
            ConfigurationError: the step cannot be replayed.
        """

    @abstractmethod
    def train_copy(
        self, model: Module, optimizer: Optimizer, loader: Any, budget: Budget, callbacks: Callbacks
    ) -> None:
        """Train ``model`` (a copy of the run's) on ``loader`` with a nested trainer of the
        run's settings, in this process alone, with ``callbacks`` attached."""
