"""What a sample is, small enough to show next to its numbers (``sample_preview``).

For each dataset index, one preview:

* ``image``: a thumbnail of an image-like input — a tensor or array of shape ``(C, H, W)``
  or ``(H, W, C)`` with 1-4 channels, or ``(H, W)`` — scaled down to at most ``size`` pixels
  on its longest side (never up), as 8-bit pixels, row-major, channels last (base64);
* ``text``: a string input, or the text the run's ``describe_sample`` hook returns;
* ``tensor``: a one-line summary of any other input (dtype, shape, range; the first values
  of a short or integer one, such as token ids);
* ``error``: why the sample could not be read.

The hook ``describe_sample(index)`` (or ``describe_sample(index, split)``) may return a
string, an image-like tensor or array, or a PIL image; whatever it returns wins over the
dataset's own item (``None`` leaves that sample to the dataset). Texts are cut at
:data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import base64
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

Describe = Callable[..., Any]
"""``describe_sample(index)`` or ``describe_sample(index, split)``."""

MAX_TEXT = 500
"""Longest text of a preview, in characters."""

_INPUT_KEYS = ("image", "img", "pixel_values", "input", "inputs", "x", "text", "input_ids")
_LABEL_KEYS = ("label", "labels", "target", "targets", "y")


def previews(
    dataset: Any,
    indices: Sequence[int],
    size: int,
    *,
    split: str = "train",
    describe: Describe | None = None,
) -> list[dict[str, Any]]:
    """One preview per index (see the module docstring); never raises for one bad sample.

    Args:
        dataset: the split's map-style dataset (``dataset[index]``), or ``None`` when the
            split has none (then only ``describe`` can say what a sample is).
        indices: dataset indices.
        size: the longest side of a thumbnail, in pixels.
        split: the split, handed to a two-argument ``describe``.
        describe: the run's ``describe_sample`` hook.

    Example:
        >>> previews([(torch.zeros(1, 28, 28), 3)], [0], 16)[0]["kind"]
        'image'
    """
    call = _caller(describe, split) if describe is not None else None
    return [_one(dataset, int(index), size, call) for index in indices]


def _caller(describe: Describe, split: str) -> Callable[[int], Any]:
    try:
        parameters = inspect.signature(describe).parameters.values()
        positional = [
            p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        takes_split = len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        takes_split = False
    return (lambda index: describe(index, split)) if takes_split else describe


def _one(
    dataset: Any, index: int, size: int, describe: Callable[[int], Any] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    try:
        item = None if dataset is None else dataset[index]
        label = _label_of(item)
        if label is not None:
            out["label"] = label
        shown = describe(index) if describe is not None else None
        if shown is None:  # no hook, or the hook leaves this sample to the dataset
            shown = _input_of(item)
        if shown is None and dataset is None:
            return {**out, "kind": "error", "text": _NO_DATASET}
        out.update(render(shown, size))
    except Exception as exc:  # a sample that cannot be read must not fail the others
        reason = f"cannot read sample {index}: {type(exc).__name__}: {exc}"
        out.update(kind="error", text=_cut(reason))
    return out


_NO_DATASET = (
    "this split's loader has no map-style dataset to read samples from; pass "
    "describe_sample= to say what a sample is"
)


def render(value: Any, size: int) -> dict[str, Any]:
    """The preview fields of one value: an image, a text or a tensor summary."""
    if isinstance(value, str):
        return {"kind": "text", "text": _cut(value)}
    if isinstance(value, bytes):
        return {"kind": "text", "text": _cut(value.decode("utf-8", "replace"))}
    array = _as_tensor(value)
    if array is None:
        return {"kind": "text", "text": _cut(repr(value))}
    image = _image_layout(array)
    if image is not None:
        return _thumbnail(image, size)
    return {"kind": "tensor", "text": summary(array)}


def summary(tensor: torch.Tensor) -> str:
    """``float32[3, 17] mean 0.12 std 0.91 range -2.1 … 3.3``; the first values of a short or
    integer tensor (``int64[128] 101, 2054, 3, … ``)."""
    shape = ", ".join(str(n) for n in tensor.shape)
    head = f"{str(tensor.dtype).removeprefix('torch.')}[{shape}]"
    flat = tensor.detach().reshape(-1)
    if flat.numel() == 0:
        return f"{head} (empty)"
    if not (flat.is_floating_point() or flat.is_complex()) or flat.numel() <= 8:
        shown = ", ".join(_format(v) for v in flat[:16].tolist())
        more = ", …" if flat.numel() > 16 else ""
        return _cut(f"{head} {shown}{more}")
    values = flat.double()
    finite = values[torch.isfinite(values)]
    if finite.numel() == 0:
        return f"{head} no finite value"
    text = (
        f"{head} mean {_format(float(finite.mean()))} std {_format(float(finite.std()))} "
        f"range {_format(float(finite.min()))} … {_format(float(finite.max()))}"
    )
    missing = values.numel() - finite.numel()
    return text + (f", {missing} NaN/inf" if missing else "")


def _thumbnail(image: torch.Tensor, size: int) -> dict[str, Any]:
    """``image`` as ``(C, H, W)`` floats scaled to at most ``size`` pixels, as 8-bit pixels."""
    channels, height, width = image.shape
    scale = min(1.0, size / max(height, width))
    target = (max(1, round(height * scale)), max(1, round(width * scale)))
    pixels = image.double()
    if target != (height, width):
        pixels = F.interpolate(pixels[None], size=target, mode="area")[0]
    pixels = _to_bytes(pixels, integer=not image.is_floating_point())
    data = pixels.permute(1, 2, 0).contiguous().numpy().astype(np.uint8).tobytes()
    return {
        "kind": "image",
        "width": target[1],
        "height": target[0],
        "channels": channels,
        "pixels": base64.b64encode(data).decode("ascii"),
    }


def _to_bytes(pixels: torch.Tensor, integer: bool) -> torch.Tensor:
    """Values 0-255: 8-bit images as they are, [0, 1] images scaled, others stretched."""
    pixels = torch.nan_to_num(pixels, nan=0.0, posinf=0.0, neginf=0.0)
    low, high = float(pixels.min()), float(pixels.max())
    if integer and low >= 0 and high <= 255:
        return pixels.round().clamp(0, 255)
    if low >= 0 and high <= 1:
        return (pixels * 255).round()
    span = high - low
    return ((pixels - low) / span * 255).round() if span > 0 else torch.zeros_like(pixels)


def _image_layout(tensor: torch.Tensor) -> torch.Tensor | None:
    """``tensor`` as ``(C, H, W)`` with 1-4 channels when it looks like an image."""
    if tensor.is_complex() or tensor.dtype == torch.bool:
        return None
    if tensor.ndim == 2 and min(tensor.shape) >= 4:
        return tensor[None]
    if tensor.ndim != 3:
        return None
    if 1 <= tensor.shape[0] <= 4 and min(tensor.shape[1:]) >= 4:
        return tensor
    if 1 <= tensor.shape[2] <= 4 and min(tensor.shape[:2]) >= 4:
        return tensor.permute(2, 0, 1)
    return None


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return torch.from_numpy(np.ascontiguousarray(value))
    if hasattr(value, "mode") and hasattr(value, "size") and hasattr(value, "getdata"):
        return torch.from_numpy(np.asarray(value).copy())  # a PIL image
    if isinstance(value, int | float) and not isinstance(value, bool):
        return torch.tensor(value)
    return None


def _input_of(item: Any) -> Any:
    """The model input of a dataset item: ``x`` of ``(x, y)``, a known key of a dict."""
    if isinstance(item, Mapping):
        for key in _INPUT_KEYS:
            if key in item:
                return item[key]
        return next(iter(item.values()), None)
    if isinstance(item, tuple | list) and item:
        return item[0]
    return item


def _label_of(item: Any) -> Any:
    if isinstance(item, Mapping):
        value = next((item[k] for k in _LABEL_KEYS if k in item), None)
    elif isinstance(item, tuple | list) and len(item) >= 2:
        value = item[1]
    else:
        return None
    if isinstance(value, torch.Tensor):
        value = value.item() if value.numel() == 1 else None
    elif isinstance(value, np.ndarray | np.generic):
        value = value.item() if value.size == 1 else None
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
