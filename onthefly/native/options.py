"""The native loop's keyword arguments as one typed list, :class:`LoopOptions`.

``onthefly.native.Trainer`` takes them as ``**options: Unpack[LoopOptions]`` and
``onthefly.Trainer`` takes the same list beside the session's options, so the two signatures
can never drift apart and type checkers and IDEs see every argument of both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from typing_extensions import TypedDict


class LoopOptions(TypedDict, total=False):
    """The keyword arguments of the native loop, each optional, as
    :class:`onthefly.native.Trainer` and ``onthefly.Trainer`` take them.

    Attributes:
        max_epochs: stop after this many epochs (``None`` or ``-1``: no epoch limit).
        max_steps: stop after this many optimizer steps (``None``: no step limit). One of the two
            limits is required. Both stay writable during the run (``trainer.max_epochs``, or
            Lightning's spelling ``trainer.fit_loop.max_epochs``).
        val_every_n_epochs: validate on ``val_loader`` every n epochs; ``0`` never. ``None``
            (not given) is ``0``, and ``fit`` with a ``val_loader`` then logs that validation
            is off.
        callbacks: Lightning callbacks (or any objects with Lightning-named hook methods);
            default none.
        precision: ``"32"`` (default), ``"bf16-mixed"`` or ``"16-mixed"`` (autocast; a
            gradient scaler only for ``"16-mixed"`` on CUDA).
        device: where to train; default CUDA, else MPS, else CPU. Model and batches move there.
        grad_clip_norm: clip the global gradient norm (default step only); ``None`` (default):
            no clipping.
        metrics: ``{"acc": torchmetrics.Accuracy(...)}``; updated by the default step with
            ``(preds, target)``, computed at each epoch's end into ``callback_metrics``
            (validation and test copies as ``val_acc`` / ``test_acc``). torchmetrics' input
            checks read values back from the device; ``validate_args=False`` avoids that sync.
            Default none.
        progress_bar: show a tqdm bar (epoch, step, loss) on stderr (default ``True``).
        batch_keys: ``(input_key, target_key)`` of dict batches for the default steps;
            ``None`` (default): the common keys (``image``/``label``, ``input_ids``/``labels``,
            …; see ``docs/per-sample.md``).

    Example:
        >>> options: LoopOptions = {"max_epochs": 3, "val_every_n_epochs": 1}
        >>> sorted(options)
        ['max_epochs', 'val_every_n_epochs']
    """

    max_epochs: int | None
    max_steps: int | None
    val_every_n_epochs: int | None
    callbacks: Sequence[object] | object
    precision: str | int
    device: str | torch.device | None
    grad_clip_norm: float | None
    metrics: Mapping[str, Any] | None
    progress_bar: bool
    batch_keys: tuple[str, str] | None


LOOP_OPTIONS = LoopOptions.__optional_keys__
"""The names of the loop's keyword arguments."""
