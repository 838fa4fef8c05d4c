"""Work beside a Lightning run's training: its loss replayed on a batch, a copy trained.

* :func:`loss_closure`: the module's own ``training_step`` inside the precision plugin's
  context; its ``self.log`` calls are discarded, so a probe never shows up in the run's
  logged metrics.
* :func:`train_copy`: a short nested ``lightning.Trainer.fit`` of a module copy (the user's
  ``training_step``; the parent's accelerator, device, precision, clipping and accumulation;
  no logger, checkpoints, validation or progress bar).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from lightning.pytorch.utilities.signature_utils import is_param_in_hook_signature
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from onthefly.drivers.base import Budget
from onthefly.errors import ConfigurationError


def loss_closure(trainer: Any, module: Any, batch_idx: int) -> Callable[[Any], torch.Tensor]:
    """``fn(batch) -> loss`` by the module's ``training_step`` (see the module docstring).

    Raises:
        ConfigurationError: the module uses manual optimization.
    """
    if not module.automatic_optimization:
        raise ConfigurationError(
            f"{type(module).__name__} uses manual optimization: its training_step steps the "
            "optimizers itself, so it cannot be replayed; expected automatic optimization"
        )
    with_idx = is_param_in_hook_signature(module.training_step, "batch_idx", min_args=2)

    def compute(batch: Any) -> torch.Tensor:
        args = (batch, batch_idx) if with_idx else (batch,)
        with trainer.precision_plugin.train_step_context(), _logging_muted(module):
            output = module.training_step(*args)
        loss = output.get("loss") if isinstance(output, dict) else output
        if not isinstance(loss, torch.Tensor):
            raise ConfigurationError(
                f"training_step returned {type(output).__name__}; expected a loss tensor or a "
                "dict with 'loss'"
            )
        return loss

    return compute


@contextlib.contextmanager
def _logging_muted(module: Any) -> Iterator[None]:
    # Instance attributes shadow the methods for the probe only, then are removed.
    def discard(*args: Any, **kwargs: Any) -> None:
        return None

    module.log = module.log_dict = discard
    try:
        yield
    finally:
        del module.log, module.log_dict


def train_copy(
    parent: Any,
    module: Any,
    optimizer: torch.optim.Optimizer,
    loader: Any,
    budget: Budget,
    callbacks: Sequence[object],
) -> None:
    """Fit ``module`` (a copy of ``parent``'s) on ``loader`` for ``budget`` (see the module
    docstring), with ``callbacks`` attached."""
    import lightning.pytorch as pl  # a nested Trainer, built only when a fork trains

    # The fork trains with the optimizer made for it (fresh or cloned), not a new one from
    # the module's configure_optimizers (which would also bring its schedulers).
    module.__dict__["configure_optimizers"] = lambda: optimizer
    accelerator, devices = _accelerator(parent.strategy.root_device)
    with warnings.catch_warnings(), _quiet_lightning():
        # Lightning's hints about the nested trainer's own settings (few workers, a short
        # run) are not the user's business; the user's own warnings still pass.
        warnings.simplefilter("ignore", PossibleUserWarning)
        fork = pl.Trainer(
            accelerator=accelerator,
            devices=devices,
            precision=parent.precision,
            max_steps=budget.steps if budget.steps is not None else -1,
            max_epochs=budget.epochs if budget.epochs is not None else -1,
            gradient_clip_val=parent.gradient_clip_val,
            gradient_clip_algorithm=parent.gradient_clip_algorithm,
            accumulate_grad_batches=parent.accumulate_grad_batches,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=list(callbacks),  # type: ignore[arg-type]  # Lightning-named hooks suffice
        )
        fork.fit(module, train_dataloaders=loader)


def _accelerator(device: torch.device) -> tuple[str, Any]:
    if device.type == "cuda":
        return "cuda", [device.index or 0]
    if device.type == "mps":
        return "mps", 1
    return "cpu", 1


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Lightning's INFO lines about the nested trainer (devices, ...) stay off the dashboard."""
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
