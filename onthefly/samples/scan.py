"""A full pass of the current model over one split: every sample's loss, right now.

The scan never disturbs the run: it iterates a *new* ``DataLoader`` over the same dataset
(:func:`~onthefly.dataloaders.loader_like`: same batch size, workers and their options,
collate function and memory pinning; sequential order, no ``drop_last``, no persistent
workers), so the training loader's position and workers are untouched and every sample is
seen exactly once, its id being its dataset index. It runs in eval mode under
``no_grad`` with every random number generator forked (torch, CUDA, numpy, ``random``); each
module's train/eval mode is put back afterwards. It checks ``cancelled()`` before each batch.

Per batch it does what a plain evaluation loop does (move, forward, loss) plus a few small
tensor operations for correctness and margin; the values stay on the device and are copied
to the host every :data:`COPY_EVERY` batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.pytorch.utilities.seed import isolate_rng
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from onthefly.batches import BatchKeys, batch_size, call_model, predictions, unpack
from onthefly.dataloaders import loader_like
from onthefly.samples.attribution import ids_from_batch
from onthefly.samples.capture import host_values, per_sample
from onthefly.samples.loss_spec import LossSpec
from onthefly.samples.store import ScanResult

COPY_EVERY = 64
"""Batches whose values are gathered on the device before one copy to the host."""

MAX_OUTPUT_DIMS = 256
"""Model outputs up to this many values per sample are kept as the explorer's embedding."""

EmbeddingFn = Callable[[nn.Module, Any], torch.Tensor]
"""``fn(model, batch) -> Tensor[B, D]``: a user's per-sample embedding, for clustering and the
explorer (called in eval mode under ``no_grad`` during scans)."""


@dataclass(frozen=True)
class Progress:
    """How far a scan got: ``done`` samples of ``total`` (``None`` when unknown)."""

    done: int
    total: int | None
    elapsed: float


def scan_loader(loader: Iterable[Any]) -> Iterable[Any]:
    """A fresh loader over ``loader``'s data: sequential, every sample, its own workers.

    Plain iterables (not ``DataLoader`` s) are iterated as they are.
    """
    if not isinstance(loader, DataLoader):
        return loader
    size = loader.batch_size
    if size is None and loader.batch_sampler is not None:
        size = getattr(loader.batch_sampler, "batch_size", None) or 64
    # loader_like's defaults suit a scan: sequential and in order (ids are positions), no
    # persistent workers (one pass) and no generator (the training loader's must not move).
    return loader_like(loader, batch_size=size, drop_last=False)


def dataset_size(loader: Iterable[Any]) -> int | None:
    """The number of samples behind ``loader``, when it is known."""
    dataset = getattr(loader, "dataset", None)
    if dataset is None or isinstance(dataset, IterableDataset):
        return None
    try:
        return len(dataset)
    except TypeError:
        return None


@contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode, ``no_grad`` and forked RNGs; every module's own mode restored after."""
    modes = [(module, module.training) for module in model.modules()]
    with isolate_rng(), torch.no_grad():
        model.eval()
        try:
            yield
        finally:
            for module, training in modes:
                module.training = training


class _Columns:
    """Per-batch device values, moved to the host every few batches."""

    def __init__(self) -> None:
        self.device: dict[str, list[torch.Tensor]] = {}
        self.host: dict[str, list[np.ndarray]] = {}

    def add(self, name: str, value: torch.Tensor) -> None:
        self.device.setdefault(name, []).append(value)

    def move(self) -> None:
        for name, tensors in self.device.items():
            if tensors:
                self.host.setdefault(name, []).append(torch.cat(tensors).cpu().numpy())
        self.device = {}

    def get(self, name: str, n: int, dtype: Any) -> np.ndarray:
        parts = self.host.get(name)
        if not parts:
            return np.full(n, np.nan if np.issubdtype(dtype, np.floating) else -1, dtype=dtype)
        return np.concatenate(parts).astype(dtype, copy=False)


def run_scan(
    model: nn.Module,
    loader: Iterable[Any],
    spec: LossSpec,
    *,
    split: str,
    step: int,
    epoch: int,
    embedding_fn: EmbeddingFn | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    progress_every_s: float = 0.25,
    cancelled: Callable[[], bool] = lambda: False,
    batch_keys: BatchKeys | None = None,
) -> ScanResult | None:
    """Evaluate every sample of ``loader``'s data with the current ``model``.

    Args:
        model: the model; batches are moved to its device.
        loader: the split's loader (see :func:`scan_loader`; it is not iterated itself).
        spec: the loss function (from :func:`~onthefly.samples.loss_spec.describe_loss`).
        split: the split's name, recorded in the result.
        step: the run's step now.
        epoch: the run's epoch now.
        embedding_fn: the user's embedding hook, or ``None``.
        on_progress: called about every ``progress_every_s`` seconds, and at the end.
        progress_every_s: seconds between two progress calls.
        cancelled: checked before each batch; ``True`` abandons the scan.
        batch_keys: ``(input_key, target_key)`` of dict batches (see
            :func:`~onthefly.batches.unpack`).

    Returns:
        The result, or ``None`` when cancelled.

    Raises:
        ConfigurationError: a batch cannot be unpacked into inputs and targets.
    """
    source = scan_loader(loader)
    indexed = isinstance(source, DataLoader) and not isinstance(source.dataset, IterableDataset)
    total = dataset_size(source)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    columns = _Columns()
    started = last_report = time.perf_counter()
    done = 0
    ignore: int | None = None
    with evaluating(model):
        for batch_idx, raw in enumerate(source):
            if cancelled():
                return None
            batch = raw if device.type == "cpu" else move_data_to_device(raw, device)
            x, y = unpack(batch, batch_keys)
            n = int(y.shape[0]) if isinstance(y, torch.Tensor) and y.ndim else batch_size(batch)
            preds = predictions(call_model(model, x))
            # Small class scores are kept: correctness and margins are then computed once on
            # the host, from them (fewer kernels per batch).
            on_host = embedding_fn is None and _small(preds, n)
            values = per_sample(spec, preds, y, n, correctness=not on_host)
            if values is None:
                raise ValueError(
                    f"the loss function's unreduced values have shape {_shape(spec, preds, y)}; "
                    f"expected {n} samples first (a per-sample loss)"
                )
            keyed = None if indexed else ids_from_batch(batch, n)
            if keyed is not None:
                columns.add("ids", keyed)
            columns.add("loss", values.loss_now())
            for name, tensor in (
                ("correct", values.correct),
                ("label", values.label),
                ("predicted", values.predicted),
            ):
                if tensor is not None:
                    columns.add(name, tensor)
            ignore = values.ignore
            embedding = _embedding(model, batch, preds, n, embedding_fn)
            if embedding is not None:
                columns.add("embedding", embedding)
            margin = None if on_host else _margin(preds, y)
            if margin is not None:
                columns.add("margin", margin)
            done += n
            if (batch_idx + 1) % COPY_EVERY == 0:
                columns.move()
            now = time.perf_counter()
            if on_progress is not None and now - last_report >= progress_every_s:
                last_report = now
                on_progress(Progress(done, total, now - started))
    columns.move()
    result = _result(columns, split, step, epoch, done, time.perf_counter() - started)
    if "ids" not in columns.host:  # one id per sample in order: its position, or its arrival
        result.ids = np.arange(done, dtype=np.int64)
    if "label" in columns.host:  # one class per sample: settle ignored targets, correctness
        predicted = columns.get("predicted", done, np.int64)
        from_classes = host_values(result.loss, result.label, predicted, ignore)
        result.correct = np.where(np.isnan(result.correct), from_classes, result.correct)
        if (
            embedding_fn is None
            and result.embedding is not None
            and "predicted" not in columns.host
        ):
            _score_columns(result)
    result.duration = time.perf_counter() - started
    if on_progress is not None:
        on_progress(Progress(done, total, result.duration))
    return result


def _result(
    columns: _Columns, split: str, step: int, epoch: int, n: int, duration: float
) -> ScanResult:
    embedding = None
    if columns.host.get("embedding"):
        embedding = np.concatenate(columns.host["embedding"]).astype(np.float32, copy=False)
    return ScanResult(
        split=split,
        step=step,
        epoch=epoch,
        ids=columns.get("ids", n, np.int64),
        loss=columns.get("loss", n, np.float32),
        correct=columns.get("correct", n, np.float32),
        margin=columns.get("margin", n, np.float32),
        label=columns.get("label", n, np.float64),
        embedding=embedding,
        duration=duration,
    )


def _margin(preds: Any, target: Any) -> torch.Tensor | None:
    """Gold logit minus the best other logit, for ``[B, C]`` scores and ``[B]`` classes."""
    if not (isinstance(preds, torch.Tensor) and isinstance(target, torch.Tensor)):
        return None
    if preds.ndim != 2 or preds.shape[1] < 2 or target.ndim != 1 or target.is_floating_point():
        return None
    classes = preds.shape[1]
    gold_class = target.clamp(0, classes - 1).unsqueeze(1)
    top2 = preds.float().topk(2, dim=1)
    gold = preds.float().gather(1, gold_class).squeeze(1)
    best_other = torch.where(
        top2.indices[:, 0] == gold_class.squeeze(1), top2.values[:, 1], top2.values[:, 0]
    )
    valid = (target >= 0) & (target < classes)
    return torch.where(valid, gold - best_other, torch.nan)


def _small(preds: Any, n: int) -> bool:
    return isinstance(preds, torch.Tensor) and preds.numel() // max(n, 1) <= MAX_OUTPUT_DIMS


def _score_columns(result: ScanResult) -> None:
    """Correctness and margin of each row with a class label, from its stored class scores."""
    assert result.embedding is not None
    scores, label = result.embedding, result.label
    classes = scores.shape[1]
    known = np.isfinite(label) & (label >= 0) & (label < classes) & np.isfinite(result.loss)
    if classes < 2 or not known.any():
        return
    rows = np.flatnonzero(known)
    gold_class = label[rows].astype(np.int64)
    part = scores[rows].astype(np.float32)
    result.correct[rows] = part.argmax(axis=1) == gold_class
    gold = part[np.arange(len(rows)), gold_class]
    part[np.arange(len(rows)), gold_class] = -np.inf
    result.margin[rows] = gold - part.max(axis=1)


def _embedding(
    model: nn.Module, batch: Any, preds: Any, n: int, embedding_fn: EmbeddingFn | None
) -> torch.Tensor | None:
    if embedding_fn is not None:
        emb = embedding_fn(model, batch)
        if not isinstance(emb, torch.Tensor) or emb.ndim < 1 or emb.shape[0] != n:
            got = tuple(emb.shape) if isinstance(emb, torch.Tensor) else type(emb).__name__
            raise ValueError(f"the embedding hook returned {got}; expected a Tensor[{n}, D]")
        return emb.detach().reshape(n, -1).float()
    if _small(preds, n):
        return preds.detach().reshape(n, -1)
    return None


def _shape(spec: LossSpec, preds: Any, y: Any) -> tuple[int, ...] | str:
    try:
        return tuple(spec.unreduced(preds, y).shape)
    except Exception as exc:  # only for the error message
        return f"(not computable: {exc})"
