"""The stages of a native run (``fit``, ``validate``, ``test``) and its evaluations.

Each stage runs between its ``setup`` and ``teardown`` hooks, which (unlike Lightning) also
run after an exception and after Ctrl+C, so callbacks always release what they opened. An
evaluation runs inside ``fit`` (a validation the loop schedules, or one a callback asks for
at a batch boundary) or on its own stage after it, with the plain module: DDP's forward
would sync buffers with the other ranks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any, Protocol

import torch
from torch import nn

from onthefly.distributed.reduce import mean_over_ranks
from onthefly.errors import ConfigurationError
from onthefly.native.evaluation import StepFn, evaluate
from onthefly.native.hooks import Hooks
from onthefly.native.metrics import StageMetrics
from onthefly.native.progress import ProgressBar
from onthefly.native.state import StepState
from onthefly.sessions import loader_rng
from onthefly.sessions.data_position import TrackedLoader


class Evaluated(Protocol):
    """The trainer as its evaluations see it: its public attributes."""

    model: nn.Module | None
    train_loader: Iterable[Any] | None
    val_loaders: list[Iterable[Any]]
    test_loaders: list[Iterable[Any]]
    callback_metrics: dict[str, Any]
    world_size: int

    @property
    def step_state(self) -> StepState | None: ...


class Stages:
    """One trainer's stages and evaluations.

    Args:
        trainer: the trainer.
        hooks: calls its callbacks' hooks.
        metrics: its torchmetrics per stage.
        progress: its progress bar (closed at the end of each stage).
        step: the validation and test step.

    Attributes:
        step: the validation and test step (the default one, or the user's).
        fitting: whether ``fit`` runs now (an evaluation then runs beside training).
    """

    def __init__(
        self,
        trainer: Evaluated,
        hooks: Hooks,
        metrics: StageMetrics,
        progress: ProgressBar,
        step: StepFn,
    ) -> None:
        self.trainer = trainer
        self.hooks = hooks
        self.metrics = metrics
        self.progress = progress
        self.step = step
        self.fitting = False

    @contextmanager
    def stage(self, stage: str) -> Iterator[None]:
        """Run the block as ``stage``, between its ``setup`` and ``teardown`` hooks; an
        exception goes to ``on_exception`` and is re-raised."""
        try:
            self.hooks.call("setup", stage=stage)
            yield
        except BaseException as exc:
            self.hooks.call("on_exception", exc)
            raise
        finally:
            self.progress.close()
            self.hooks.call("teardown", stage=stage)

    def evaluate(self, stage: str) -> dict[str, torch.Tensor]:
        """Evaluate the loaders of ``stage`` (``"validation"`` or ``"test"``) now."""
        trainer = self.trainer
        run_state = trainer.step_state
        assert run_state is not None
        loaders = trainer.val_loaders if stage == "validation" else trainer.test_loaders
        assert loaders and trainer.model is not None
        state = dataclasses.replace(
            run_state, model=trainer.model, metrics=self.metrics.by_stage[stage]
        )
        return evaluate(
            stage,
            loaders,
            self.step,
            state,
            self.hooks,
            self.metrics,
            trainer.callback_metrics,
            reduce=mean_over_ranks if trainer.world_size > 1 else None,
        )

    def run(self, stage: str, isolated: bool | None) -> dict[str, Any]:
        """``run_validation`` / ``run_test``: an evaluation asked for, as Python numbers.

        Raises:
            ConfigurationError: before ``fit``, or without the stage's loader.
        """
        trainer = self.trainer
        validating = stage == "validation"
        method = "run_validation" if validating else "run_test"
        arg = "val_loader" if validating else "test_loader"
        if trainer.step_state is None:
            raise ConfigurationError(f"{method}() needs a model: call fit() first")
        if not (trainer.val_loaders if validating else trainer.test_loaders):
            raise ConfigurationError(f"{method}() found no {arg}; pass {arg}= to fit()")
        if isolated is None:
            isolated = self.fitting
        loaders = [
            TrackedLoader.unwrap(loader)
            for loader in (trainer.train_loader, *trainer.val_loaders, *trainer.test_loaders)
        ]
        with loader_rng.preserved(loaders) if isolated else nullcontext():
            if self.fitting:
                return _numbers(self.evaluate(stage))
            with self.stage("validate" if validating else "test"):
                return _numbers(self.evaluate(stage))


def _numbers(results: Mapping[str, Any]) -> dict[str, Any]:
    # One host sync per evaluation: the results leave the device here.
    return {
        k: float(v) if isinstance(v, torch.Tensor) and v.numel() == 1 else v
        for k, v in results.items()
    }
