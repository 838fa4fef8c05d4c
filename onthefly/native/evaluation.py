"""One evaluation epoch (validation or test): eval mode, no grad, train mode restored.

The random state is left to the caller: a validation the user configured draws what the
hand-written loop draws (creating a DataLoader iterator draws its workers' base seed, a
random augmentation draws its own), while an evaluation that runs beside training (a test
command, a callback's ``run_validation()``) is wrapped by the trainer so that it changes
no generator (see ``docs/hook-order.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from onthefly.batches import batch_size
from onthefly.errors import ConfigurationError
from onthefly.native.device import to_device
from onthefly.native.hooks import Hooks
from onthefly.native.metrics import StageMetrics
from onthefly.native.state import StepState
from onthefly.native.step import checked_output

StepFn = Callable[[Any, StepState], Any]
Reduce = Callable[[torch.Tensor, int], torch.Tensor]
"""``(this process's loss sum, its samples) -> mean loss`` (e.g. over the ranks)."""

# Lightning's conventional metric names: val_loss, test_loss, val_acc, ...
PREFIXES = {"validation": "val", "test": "test"}


def evaluate(
    stage: str,
    loader: Iterable[Any],
    step: StepFn,
    state: StepState,
    hooks: Hooks,
    metrics: StageMetrics,
    callback_metrics: dict[str, Any],
    reduce: Reduce | None = None,
) -> dict[str, torch.Tensor]:
    """Run ``loader`` through ``step`` with the ``on_{stage}_*`` hooks in Lightning's order.

    Args:
        stage: ``"validation"`` or ``"test"``.
        loader: the evaluation batches.
        step: ``fn(batch, state) -> {"loss": ..., ...}``.
        state: this evaluation's step state (its ``metrics`` are ``stage``'s copies).
        hooks: the run's hook dispatcher.
        metrics: the run's metrics; ``stage``'s are computed and reset here.
        callback_metrics: receives the results as ``val_loss``, ``val_<metric>`` (or ``test_*``)
            before ``on_{stage}_epoch_end`` fires.
        reduce: how the mean loss is formed; ``None``: over this process's samples.

    Returns:
        ``{"loss": mean loss over samples, **metric values}`` as tensors on the device.

    Raises:
        ConfigurationError: when the loader yields no batch, or the step returns no loss.
    """
    model = state.model
    was_training = model.training
    with torch.no_grad():
        model.eval()
        try:
            with hooks.paired(stage), hooks.paired(f"{stage}_epoch"):
                results = {"loss": _mean_loss(stage, loader, step, state, hooks, reduce)}
                results.update(metrics.compute(stage))
                prefix = PREFIXES[stage]
                callback_metrics.update({f"{prefix}_{k}": v for k, v in results.items()})
        finally:
            model.train(was_training)
    return results


def _mean_loss(
    stage: str,
    loader: Iterable[Any],
    step: StepFn,
    state: StepState,
    hooks: Hooks,
    reduce: Reduce | None,
) -> torch.Tensor:
    # Summed on the device; the caller decides when (if ever) to read it back.
    total = torch.zeros((), device=state.device)
    samples = 0
    for batch_idx, raw in enumerate(loader):
        batch = to_device(raw, state.device)
        state.batch_idx = batch_idx
        with hooks.paired(f"{stage}_batch", batch, batch_idx) as end:
            outputs = checked_output(step(batch, state), stage)
            n = batch_size(batch)
            total += outputs["loss"].float() * n
            samples += n
            end.args = (outputs, batch, batch_idx)
    if samples == 0:
        raise ConfigurationError(f"the {stage} loader yielded no batches; expected at least one")
    return total / samples if reduce is None else reduce(total, samples)
