"""The driver of the native :class:`onthefly.Trainer`.

The native trainer holds what the callbacks need as public attributes (its model, optimizer,
loss function and loaders, ``step_state``, ``max_epochs`` / ``max_steps``); this driver reads
them and imports nothing of :mod:`onthefly.native`, so that the loop can use the features
that use drivers. A nested trainer for a fork comes from the trainer's own
:meth:`~onthefly.native.trainer.Trainer.nested`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import Any

import torch
from torch import nn
from torch.nn import Module
from torch.optim import Optimizer

from onthefly.batches import unpack
from onthefly.drivers.base import (
    UNLIMITED,
    Budget,
    Callbacks,
    Driver,
    Limits,
    LoaderListener,
    Split,
    as_limit,
)
from onthefly.drivers.values import Scalar, scalar_or_none, scalars
from onthefly.errors import ConfigurationError, SessionFileError

_EVAL_PREFIXES = ("val_", "test_")


class NativeDriver(Driver):
    """An ``onthefly.Trainer``."""

    name = "native"
    fetches_ahead = False  # the loop fetches a batch right before training on it
    distributed_copies = True  # a nested trainer of one process (Trainer.nested)
    values_in_outputs = True  # a step's values are the extra keys of the dict it returns

    # --- where the run stops --------------------------------------------------------------

    def limits(self) -> Limits:
        return Limits(as_limit(self.trainer.max_epochs), as_limit(self.trainer.max_steps))

    def set_limits(self, limits: Limits) -> None:
        # The native trainer spells "no epoch limit" None.
        self.trainer.max_epochs = None if limits.max_epochs == UNLIMITED else limits.max_epochs
        self.trainer.max_steps = limits.max_steps

    def is_last_batch(self, batch_idx: int) -> bool:
        loader = self.trainer.train_loader
        return isinstance(loader, Sized) and batch_idx + 1 >= len(loader)

    def trained_batches(self, counted: int) -> int:
        return counted

    def step_counter(self) -> tuple[Any, str]:
        return self.trainer, "global_step"  # a plain attribute

    def epoch_counter(self) -> tuple[Any, str]:
        return self.trainer, "current_epoch"

    def terminating(self) -> bool:
        return False  # it marks nothing: the session's SIGTERM handler raises instead

    # --- what the user logs ---------------------------------------------------------------

    def metric_snapshot(self) -> dict[str, int]:
        return {name: id(value) for name, value in self.trainer.callback_metrics.items()}

    def step_values(self, outputs: Any) -> dict[str, Scalar]:
        # The native trainer keeps the values a step returns in callback_metrics as they are.
        if not isinstance(outputs, dict) or (len(outputs) == 1 and "loss" in outputs):
            return {}  # the usual native step: nothing logged besides the loss
        return scalars((k, v) for k, v in outputs.items() if k != "loss")

    def step_log(self) -> Any:
        return None  # the values are in the outputs (values_in_outputs)

    def epoch_values(self, before: dict[str, int], skip: set[str]) -> dict[str, Scalar]:
        # What changed during the epoch, minus the step values and evaluation results.
        return {
            name: value
            for name, value in self._changed(before).items()
            if name not in skip and not name.startswith(_EVAL_PREFIXES)
        }

    def eval_values(self, before: dict[str, int]) -> dict[str, Scalar]:
        return self._changed(before)

    def grad_norm(self) -> Scalar | None:
        # The same quantity as a callback's own (total norm before clipping), when clipping.
        return scalar_or_none(self.trainer.grad_norm)

    def computes_grad_norm(self) -> bool:
        # The default step clips with clip_grad_norm_, which returns the norm before clipping.
        trainer = self.trainer
        return not trainer.custom_training_step and trainer.grad_clip_norm is not None

    def scales_gradients(self) -> bool:
        state = self.trainer.step_state
        return state is not None and bool(state.scaler.is_enabled())

    def accumulation(self) -> int:
        return 1  # a custom step accumulates by itself; losses are reported as computed

    def _changed(self, before: dict[str, int]) -> dict[str, Scalar]:
        return scalars(
            (name, value)
            for name, value in self.trainer.callback_metrics.items()
            if before.get(name) != id(value)
        )

    # --- the run's parts ------------------------------------------------------------------

    def loss_fn(self, inputs: Any) -> Any:
        return self.trainer.loss_fn

    def reports_loss_calls(self) -> bool:
        return not self.trainer.custom_training_step  # the default step calls observe()

    def schedulers(self) -> list[Any]:
        scheduler = self.trainer.scheduler
        return [] if scheduler is None else [scheduler]

    def batch_keys(self) -> tuple[str, str] | None:
        keys: tuple[str, str] | None = self.trainer.batch_keys
        return keys

    def resume_from(self) -> Any:
        return self.trainer.resume_from

    def loaders(self, split: Split, inputs: Any) -> list[Any]:
        if split != "train":  # several validation or test loaders, in the order given
            listed = getattr(self.trainer, f"{split}_loaders", None)
            if listed is not None:
                return list(listed)
        # One loader of the split (a stand-in trainer may keep only that): any iterable.
        loader = getattr(self.trainer, f"{split}_loader")
        return [] if loader is None else [loader]

    def train_loaders(self) -> list[Any]:
        return [self.trainer.train_loader]

    def replace_train_loaders(self, loaders: Sequence[Any]) -> None:
        (self.trainer.train_loader,) = loaders

    def live_train_iterators(self) -> list[Any] | None:
        return None  # the loop's iterator is local to its epoch

    def restart_train_iterator(self) -> None:
        pass  # the loop's next iter() starts from the armed loader

    def run_loaders(self) -> list[Any]:
        # A stand-in trainer (a command dispatched outside a fit) may hold none of them.
        trainer = self.trainer
        return [
            getattr(trainer, "train_loader", None),
            *getattr(trainer, "val_loaders", []),
            *getattr(trainer, "test_loaders", []),
        ]

    def on_train_loaders_requested(self, listener: LoaderListener) -> Callable[[], None] | None:
        listener(self.train_loaders())  # fit() was handed its loaders: they are heard at once
        return _keep_listening

    # --- the training state ---------------------------------------------------------------

    def capture_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        trainer = self.trainer
        scheduler = trainer.scheduler
        step_state = trainer.step_state
        return trainer.model.state_dict(), {
            "optimizer": trainer.optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if hasattr(scheduler, "state_dict") else None,
            "scaler": step_state.scaler.state_dict() if step_state is not None else None,
            "global_step": int(trainer.global_step),
            "current_epoch": int(trainer.current_epoch),
            "callbacks": trainer.callback_states(),
        }

    def load_learned(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        if "optimizer" not in rest:
            raise SessionFileError(f"{source} was written by Lightning, not onthefly.Trainer")
        trainer = self.trainer
        trainer.model.load_state_dict(model_state)
        trainer.optimizer.load_state_dict(rest["optimizer"])
        if rest.get("scheduler") is not None and trainer.scheduler is not None:
            trainer.scheduler.load_state_dict(rest["scheduler"])
        if rest.get("scaler") and trainer.step_state is not None:
            trainer.step_state.scaler.load_state_dict(rest["scaler"])

    def restore(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        trainer = self.trainer
        try:
            self.load_learned(model_state, rest, source)
            trainer.global_step = int(rest["global_step"])
            trainer.current_epoch = int(rest["current_epoch"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise SessionFileError(
                f"{source} does not fit this run ({type(exc).__name__}: {exc}); "
                "expected the optimizer and scheduler of the exported run"
            ) from None
        trainer.load_callback_states(rest.get("callbacks", {}))

    def placement(self) -> dict[str, Any]:
        return {
            "val_every_n_epochs": self.trainer.val_every_n_epochs,
            "device": str(self.trainer.device),
        }

    # --- work besides training ------------------------------------------------------------

    def run_test(self, label: str, source: Any) -> dict[str, Any]:
        return dict(self.trainer.run_test(label=label, isolated=False))

    def loss_closure(self, module: nn.Module, batch_idx: int) -> Callable[[Any], torch.Tensor]:
        trainer = self.trainer
        loss_fn, model = trainer.loss_fn, trainer.model
        if loss_fn is None:
            raise ConfigurationError(
                "health checks need the loss: pass loss_fn= to fit() (a custom training step "
                "alone cannot be replayed without stepping the optimizer)"
            )
        autocast = trainer.step_state.autocast  # the run's precision, as the default step

        def compute(batch: Any) -> torch.Tensor:
            x, y = unpack(batch)
            with autocast:
                result: torch.Tensor = loss_fn(model(x), y)
            return result

        return compute

    def train_copy(
        self, model: Module, optimizer: Optimizer, loader: Any, budget: Budget, callbacks: Callbacks
    ) -> None:
        parent = self.trainer
        fork = parent.nested(max_steps=budget.steps, max_epochs=budget.epochs, callbacks=callbacks)
        fork.fit(model=model, optimizer=optimizer, loss_fn=parent.loss_fn, train_loader=loader)


def _keep_listening() -> None:
    """Nothing to stop: the native trainer requests no loaders."""
