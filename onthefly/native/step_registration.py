"""The native Trainer's step decorators: ``@trainer.training_step`` and
``@trainer.validation_step`` put the user's own steps in place of the default ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from onthefly.errors import ConfigurationError
from onthefly.native.stages import Stages
from onthefly.native.state import StepState

StepFn = TypeVar("StepFn", bound=Callable[..., Any])


class StepRegistration:
    """The step decorators of :class:`onthefly.native.Trainer` (its base class), over the
    steps it runs: ``_training_step`` (the default one until replaced) and its evaluation
    stages' step."""

    _training_step: Callable[[Any, StepState], Any]
    _custom_training_step: bool
    _stages: Stages

    @property
    def custom_training_step(self) -> bool:
        """Whether a training step was registered (``False``: the default step runs)."""
        return self._custom_training_step

    def training_step(self, fn: StepFn) -> StepFn:
        """Register ``fn(batch, state) -> dict`` as the training step (a decorator).

        ``fn`` owns the update: it zeroes gradients, calls backward and steps the optimizer
        (through ``state.scaler``) when it wants to, e.g. every 4 micro-batches. The trainer
        counts the optimizer's real steps in ``global_step`` and fires
        ``on_before_optimizer_step`` before each; ``state.backward(loss)`` fires the backward
        hooks. The returned dict must hold ``"loss"``; other keys go to ``callback_metrics``.
        ``state`` reads as attributes (``state.optimizer``) or as a mapping
        (``state["optimizer"]``, as steps written for the original OnTheFly do).

        Args:
            fn: the step function; returned unchanged.

        Raises:
            ConfigurationError: when ``fn`` is not callable.

        Example:
            >>> @trainer.training_step
            ... def step(batch, state):
            ...     x, y = batch
            ...     loss = state.loss_fn(state.model(x), y)
            ...     loss.backward()
            ...     state.optimizer.step()
            ...     state.optimizer.zero_grad()
            ...     return {"loss": loss}
        """
        self._training_step = _callable(fn, "training_step")
        self._custom_training_step = True
        return fn

    def validation_step(self, fn: StepFn) -> StepFn:
        """Register ``fn(batch, state) -> dict`` as the validation and test step (a decorator).

        It runs in eval mode under ``torch.no_grad()``; the dict must hold ``"loss"`` (averaged
        over samples, weighted by batch size).

        Args:
            fn: the step function; returned unchanged.

        Raises:
            ConfigurationError: when ``fn`` is not callable.
        """
        self._stages.step = _callable(fn, "validation_step")
        return fn


def _callable(fn: Any, name: str) -> Any:
    if not callable(fn):
        raise ConfigurationError(
            f"@trainer.{name} got {fn!r}; expected a function fn(batch, state) -> dict"
        )
    return fn
