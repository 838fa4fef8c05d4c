"""One evaluation epoch (validation or test): eval mode, no grad, train mode restored.

The random state is left to the caller: a validation the user configured draws what the
hand-written loop draws (creating a DataLoader iterator draws its workers' base seed, a
random augmentation draws its own), while an evaluation that runs beside training (a test
command, a callback's ``run_validation()``) is wrapped by the trainer so that it changes
no generator (see ``docs/hook-order.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader

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


def loaders_of(given: Any) -> list[Iterable[Any]]:
    """The evaluation loaders in ``given``, as Lightning reads ``val_dataloaders``.

    A list, tuple or dict whose items are all ``DataLoader`` objects is several loaders
    (evaluated in order; a dict's names are not used, Lightning numbers them too); anything
    else is one loader, so a plain list of batches stays one loader.

    Example:
        >>> len(loaders_of([DataLoader([1, 2]), DataLoader([3])]))
        2
        >>> len(loaders_of([(1, 2), (3, 4)]))  # batches, not loaders
        1
    """
    if given is None:
        return []
    items = list(given.values()) if isinstance(given, Mapping) else given
    several = isinstance(items, (list, tuple)) and len(items) > 0
    if several and all(isinstance(item, DataLoader) for item in items):
        return list(items)
    return [given]


def loader_suffix(dataloader_idx: int, loaders: int) -> str:
    """``/dataloader_idx_N`` with several loaders (Lightning's naming), else ``""``."""
    return f"/dataloader_idx_{dataloader_idx}" if loaders > 1 else ""


def evaluate(
    stage: str,
    loaders: Sequence[Iterable[Any]],
    step: StepFn,
    state: StepState,
    hooks: Hooks,
    metrics: StageMetrics,
    callback_metrics: dict[str, Any],
    reduce: Reduce | None = None,
) -> dict[str, torch.Tensor]:
    """Run each loader through ``step`` with the ``on_{stage}_*`` hooks in Lightning's order.

    With several loaders, as in Lightning: the stage and epoch hooks fire once around all of
    them; the batch hooks get the loader's ``dataloader_idx`` as their last argument (and
    ``state.dataloader_idx`` is set); every result is computed per loader and named with
    the suffix ``/dataloader_idx_N`` (``val_loss/dataloader_idx_0``, ...).

    Args:
        stage: ``"validation"`` or ``"test"``.
        loaders: the evaluation loaders (one or more), each an iterable of batches.
        step: ``fn(batch, state) -> {"loss": ..., ...}``.
        state: this evaluation's step state (its ``metrics`` are ``stage``'s copies).
        hooks: the run's hook dispatcher.
        metrics: the run's metrics; ``stage``'s are computed and reset here.
        callback_metrics: receives the results as ``val_loss``, ``val_<metric>`` (or ``test_*``)
            before ``on_{stage}_epoch_end`` fires.
        reduce: how the mean loss is formed; ``None``: over this process's samples.

    Returns:
        ``{"loss": mean loss over samples, **metric values}`` as tensors on the device (each
        name with its loader's suffix when there are several).

    Raises:
        ConfigurationError: when a loader yields no batch, or the step returns no loss.
    """
    model = state.model
    was_training = model.training
    prefix = PREFIXES[stage]
    results: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        model.eval()
        try:
            with hooks.paired(stage), hooks.paired(f"{stage}_epoch"):
                for index, loader in enumerate(loaders):
                    suffix = loader_suffix(index, len(loaders))
                    dataloader_idx = index if suffix else None
                    state.dataloader_idx = index
                    values = {
                        "loss": _mean_loss(
                            stage, loader, step, state, hooks, reduce, dataloader_idx
                        )
                    }
                    values.update(metrics.compute(stage))
                    results.update({f"{k}{suffix}": v for k, v in values.items()})
                callback_metrics.update({f"{prefix}_{k}": v for k, v in results.items()})
        finally:
            state.dataloader_idx = 0
            model.train(was_training)
    return results


def _mean_loss(
    stage: str,
    loader: Iterable[Any],
    step: StepFn,
    state: StepState,
    hooks: Hooks,
    reduce: Reduce | None,
    dataloader_idx: int | None,
) -> torch.Tensor:
    # Summed on the device; the caller decides when (if ever) to read it back.
    total = torch.zeros((), device=state.device)
    samples = 0
    # Lightning passes dataloader_idx to the batch hooks only when there are several loaders.
    last = () if dataloader_idx is None else (dataloader_idx,)
    for batch_idx, raw in enumerate(loader):
        batch = to_device(raw, state.device)
        state.batch_idx = batch_idx
        with hooks.paired(f"{stage}_batch", batch, batch_idx, *last) as end:
            outputs = checked_output(step(batch, state), stage)
            n = batch_size(batch)
            total += outputs["loss"].float() * n
            samples += n
            end.args = (outputs, batch, batch_idx, *last)
    if samples == 0:
        which = "" if dataloader_idx is None else f" (dataloader_idx {dataloader_idx})"
        raise ConfigurationError(
            f"the {stage} loader{which} yielded no batches; expected at least one"
        )
    return total / samples if reduce is None else reduce(total, samples)
