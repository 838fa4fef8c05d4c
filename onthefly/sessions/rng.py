"""Capture and restore every random number generator a training step may draw from.

A captured state is a dict of tensors, ints and tuples only, so it is saved with
``torch.save`` and loaded back with ``weights_only=True``: Python's ``random``, NumPy's
legacy global generator, torch's CPU generator and each CUDA device's generator (when CUDA
is initialised). In a distributed run each rank captures its own.
"""

from __future__ import annotations

import ctypes
import random
from typing import Any, cast

import numpy as np
import torch

RngState = dict[str, Any]


GLOBAL = frozenset({"python", "numpy", "torch"})
"""The names of the global CPU generators a state holds: Python's, NumPy's, torch's."""


def capture(cuda: bool = True, only: frozenset[str] = GLOBAL) -> RngState:
    """The current state of every generator.

    Args:
        cuda: include the CUDA generators (when CUDA is initialised). Skipping them makes the
            capture cheap enough to take before each batch is fetched.
        only: the global CPU generators to include (of :data:`GLOBAL`); :func:`restore`
            leaves the others as they are. Python's and NumPy's cost ~45 µs of the ~50 a
            full capture takes (their states are 624-word tuples), torch's ~2.

    Example:
        >>> state = capture()
        >>> a = torch.rand(1); restore(state); bool(torch.rand(1) == a)
        True
    """
    state: RngState = {}
    if "python" in only:
        state["python"] = random.getstate()
    if "numpy" in only:
        state["numpy"] = _NUMPY.state()
    if "torch" in only:
        state["torch"] = torch.get_rng_state()
    if cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


class _NumpyState:
    """NumPy's legacy global generator's state, read in full only when it changed.

    ``np.random.get_state()`` copies the generator's 624 words one by one (~45 µs); its raw
    bytes, read through the bit generator's ctypes interface, cost well under a microsecond.
    Unchanged bytes mean an unchanged state, but for the cached second Gaussian of a pair
    (drawing it moves no word), so the last full state is reused only when it held none.
    """

    def __init__(self) -> None:
        self._raw: bytes | None = None
        self._state: tuple[Any, ...] | None = None

    def state(self) -> tuple[Any, ...]:
        """The state as :func:`capture` keeps it (``kind, keys, pos, has_gauss, cached``)."""
        raw = self._raw_state()
        last = self._state
        if raw is not None and raw == self._raw and last is not None and not last[3]:
            return last
        kind, keys, pos, has_gauss, cached = cast(tuple[Any, ...], np.random.get_state())
        # uint32 words, widened: weights_only loading has no NumPy arrays.
        state = (str(kind), torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached)
        self._raw, self._state = raw, state
        return state

    @staticmethod
    def _raw_state() -> bytes | None:
        """The MT19937 state's bytes (its 624 words and position), or ``None`` if unreadable."""
        try:
            generator = np.random.mtrand._rand._bit_generator
            return ctypes.string_at(generator.ctypes.state_address, _MT19937_BYTES)
        except (AttributeError, TypeError, ValueError):
            return None


_MT19937_BYTES = 624 * 4 + 4
"""``mt19937_state``: ``uint32_t key[624]; int pos``."""

_NUMPY = _NumpyState()


def restore(state: RngState) -> None:
    """Put every generator back to ``state`` (from :func:`capture`; the generators it does
    not hold are left as they are).

    CUDA states are restored when both the state and this process have CUDA; a state
    captured on more devices than this process sees restores the first ones.
    """
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        for device, device_state in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(device_state, device)


def changed(before: RngState, after: RngState) -> set[str]:
    """The global CPU generators whose state differs between two full captures."""
    found = set()
    if before["python"] != after["python"]:
        found.add("python")
    kind_a, keys_a, *rest_a = before["numpy"]
    kind_b, keys_b, *rest_b = after["numpy"]
    if kind_a != kind_b or rest_a != rest_b or not torch.equal(keys_a, keys_b):
        found.add("numpy")
    if not torch.equal(before["torch"], after["torch"]):
        found.add("torch")
    return found
