"""torchmetrics per stage: updated on the device every step, computed once per epoch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchmetrics import Metric

from onthefly.errors import ConfigurationError

STAGES = ("train", "validation", "test")


class StageMetrics:
    """Independent copies of the user's metrics for training, validation and testing.

    Copies keep the stages' states apart (validation must not mix into the training epoch's
    accuracy). ``compute`` is the only synchronising call and runs once per epoch.

    Args:
        metrics: name -> ``torchmetrics.Metric``; ``None`` for none.
        device: where the metric states live (the model's device).

    Raises:
        ConfigurationError: when a value is not a ``torchmetrics.Metric``.
    """

    def __init__(self, metrics: Mapping[str, Any] | None, device: torch.device) -> None:
        metrics = dict(metrics or {})
        for name, metric in metrics.items():
            if not isinstance(metric, Metric):
                raise ConfigurationError(
                    f"metrics[{name!r}] is a {type(metric).__name__}; expected a "
                    "torchmetrics.Metric, e.g. "
                    "torchmetrics.Accuracy(task='multiclass', num_classes=10)"
                )
        train = {name: metric.to(device) for name, metric in metrics.items()}
        self.by_stage: dict[str, dict[str, Metric]] = {
            "train": train,
            "validation": {name: metric.clone() for name, metric in train.items()},
            "test": {name: metric.clone() for name, metric in train.items()},
        }

    def compute(self, stage: str) -> dict[str, Any]:
        """Compute and reset the metrics of ``stage`` that were updated since the last reset."""
        values = {}
        for name, metric in self.by_stage[stage].items():
            if metric.update_count:
                values[name] = metric.compute()
            metric.reset()
        return values

    def fresh_copies(self, stage: str) -> dict[str, Metric]:
        """Reset copies of ``stage``'s metrics (these keep their state) that never
        synchronise over the ranks: for a trainer of one process beside the run."""
        copies = {}
        for name, metric in self.by_stage[stage].items():
            twin = metric.clone()
            twin.reset()
            twin.distributed_available_fn = _one_process
            copies[name] = twin
        return copies


def _one_process() -> bool:
    return False
