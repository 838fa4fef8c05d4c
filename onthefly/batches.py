"""What a batch holds, as the default steps and the per-sample features read it.

:func:`unpack` splits a batch into inputs and targets (tuples, lists, dicts with common keys
or the trainer's ``batch_keys``), :func:`call_model` calls a model on the inputs,
:func:`predictions` reduces the model's output to what the loss gets (a tensor; the first item
of a tuple; ``logits``), and :func:`batch_size` counts its samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from onthefly.errors import ConfigurationError

INPUT_KEYS = ("x", "input", "inputs", "image", "images", "pixel_values", "input_ids")
"""Dict keys of the model input, in the order they are looked for."""
TARGET_KEYS = ("y", "target", "targets", "label", "labels")
"""Dict keys of the target, in the order they are looked for."""
MODEL_KEYWORDS = ("attention_mask", "token_type_ids")
"""Keys kept with ``input_ids``: the model is called ``model(input_ids=…, attention_mask=…)``."""

BatchKeys = tuple[str, str]
"""``(input_key, target_key)`` of the dict batches, given as ``Trainer(batch_keys=…)``."""

OWN_STEP = "or register your own step with @trainer.training_step (and @trainer.validation_step)"


def unpack(batch: Any, keys: BatchKeys | None = None) -> tuple[Any, Any]:
    """Split a batch into ``(inputs, targets)``.

    Accepts ``(x, y, ...)`` tuples or lists (extra items are ignored) and dicts: keyed by
    ``keys`` when given, else by the first of :data:`INPUT_KEYS` and the first of
    :data:`TARGET_KEYS` present (``image``/``label``, ``pixel_values``/``labels``,
    ``input_ids``/``labels``, ``input``/``target``, ``x``/``y``, …). With ``input_ids``,
    the :data:`MODEL_KEYWORDS` present are kept with it: the inputs are then a dict, which
    :func:`call_model` passes as keyword arguments.

    Args:
        batch: one batch, as the loader yields it.
        keys: ``(input_key, target_key)`` for dict batches; ``None``: the common keys.

    Raises:
        ConfigurationError: for any other batch (the message names the keys it found).

    Example:
        >>> unpack({"image": 1, "label": 2})
        (1, 2)
    """
    # The exact types first: the ABC checks cost more, and this runs at every step.
    sequence = type(batch) in (tuple, list) or (
        isinstance(batch, Sequence) and not isinstance(batch, str)
    )
    if sequence and len(batch) >= 2:
        return batch[0], batch[1]
    if isinstance(batch, Mapping):
        x_key, y_key = (
            keys if keys is not None else (_first(batch, INPUT_KEYS), _first(batch, TARGET_KEYS))
        )
        if x_key is not None and y_key is not None and x_key in batch and y_key in batch:
            return _inputs(batch, x_key), batch[y_key]
        found = ", ".join(repr(k) for k in batch)
        expected = (
            f"the keys {keys}"
            if keys is not None
            else f"one of {INPUT_KEYS} and one of {TARGET_KEYS}; name yours with "
            "Trainer(batch_keys=(input_key, target_key))"
        )
        raise ConfigurationError(
            f"the default step found no input/target in a dict batch with keys {found}; "
            f"expected {expected}, {OWN_STEP}"
        )
    raise ConfigurationError(
        f"the default step cannot unpack a batch of type {type(batch).__name__}; expected an "
        f"(x, y, ...) tuple/list or a dict with input and target keys, {OWN_STEP}"
    )


def _first(batch: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    return next((k for k in names if k in batch), None)


def _inputs(batch: Mapping[str, Any], key: str) -> Any:
    if key != "input_ids":
        return batch[key]
    extra = {k: batch[k] for k in MODEL_KEYWORDS if k in batch}
    return {key: batch[key], **extra} if extra else batch[key]


def call_model(model: Any, inputs: Any) -> Any:
    """``model(inputs)``; inputs that :func:`unpack` made a dict go as keyword arguments."""
    return model(**inputs) if type(inputs) is dict else model(inputs)


def predictions(output: Any) -> Any:
    """What the loss function gets of a model's output.

    A tensor as it is; of a tuple or list its first element (``(logits, features)``); of a
    dict its ``"logits"``; of another object its ``.logits`` (Hugging Face model outputs).

    Raises:
        ConfigurationError: for an output none of these rules applies to.

    Example:
        >>> predictions((1, 2))
        1
    """
    if type(output) is torch.Tensor or isinstance(output, torch.Tensor):
        return output  # (the exact type first: no call at every step)
    if isinstance(output, (tuple, list)) and output:
        return output[0]
    if isinstance(output, Mapping):
        if "logits" in output:
            return output["logits"]
        found = ", ".join(repr(k) for k in output)
    elif hasattr(output, "logits"):
        return output.logits
    else:
        found = None
    got = f"a dict with keys {found}" if found is not None else f"a {type(output).__name__}"
    raise ConfigurationError(
        f"the default step cannot tell the predictions in the model's output ({got}); "
        "expected a tensor, a tuple/list (its first item), a dict with 'logits' or an object "
        f"with .logits, {OWN_STEP}"
    )


def batch_size(batch: Any) -> int:
    """The number of samples in a batch: the first dimension of its first tensor (1 if none)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    items = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(batch, (Mapping, tuple, list)):
        for value in items:
            if isinstance(value, torch.Tensor) and value.dim():
                return int(value.shape[0])
    return 1
