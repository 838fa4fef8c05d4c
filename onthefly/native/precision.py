"""Numeric precision: which autocast context and gradient scaler a precision string means."""

from __future__ import annotations

import torch

from onthefly.errors import ConfigurationError

PRECISIONS = ("32", "bf16-mixed", "16-mixed")

_AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {
    "32": None,
    "bf16-mixed": torch.bfloat16,
    "16-mixed": torch.float16,
}


def parse_precision(precision: str | int) -> str:
    """Normalise a precision setting (``32`` and ``"32"`` are the same).

    Raises:
        ConfigurationError: for anything but ``"32"``, ``"bf16-mixed"`` or ``"16-mixed"``.
    """
    name = str(precision)
    if name not in _AUTOCAST_DTYPES:
        raise ConfigurationError(
            f"precision={precision!r} is not supported; expected one of {', '.join(PRECISIONS)}"
        )
    return name


class Autocast:
    """A re-enterable autocast context; a no-op at full precision.

    ``torch.autocast`` objects keep their previous state on ``self``, so one instance cannot be
    nested. This one opens a fresh ``torch.autocast`` per ``with`` and keeps them on a stack.

    Example:
        >>> with state.autocast:
        ...     loss = state.loss_fn(state.model(x), y)
    """

    def __init__(self, device_type: str, dtype: torch.dtype | None) -> None:
        self.device_type = device_type
        self.dtype = dtype
        self._open: list[torch.autocast] = []

    @property
    def enabled(self) -> bool:
        """Whether entering this context turns autocast on."""
        return self.dtype is not None

    def __enter__(self) -> None:
        if self.dtype is None:
            return
        context = torch.autocast(self.device_type, dtype=self.dtype)
        context.__enter__()
        self._open.append(context)

    def __exit__(self, *exc: object) -> None:
        if self.dtype is None:
            return
        self._open.pop().__exit__(*exc)


def make_autocast(precision: str, device: torch.device) -> Autocast:
    """The autocast context for ``precision`` on ``device``."""
    return Autocast(device.type, _AUTOCAST_DTYPES[precision])


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A gradient scaler, enabled only for ``"16-mixed"`` on CUDA.

    A disabled scaler passes through (``scale`` returns the loss, ``step`` calls
    ``optimizer.step()``, ``update`` does nothing), so the same step code runs everywhere.
    """
    enabled = precision == "16-mixed" and device.type == "cuda"
    return torch.amp.GradScaler(device.type, enabled=enabled)
