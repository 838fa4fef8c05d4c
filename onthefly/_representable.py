"""Whether a value a command would put into training fits the parameters it will act on.

A hyperparameter ends up as a scalar of the optimizer's kernels, computed in float32 for
float32 and half-precision parameters alike (torch's compute type), and its products land in
the parameters' own dtype. A value beyond what those hold either kills the run (``value
cannot be converted to type float without overflow``) or silently turns the weights into
infinities. The checks here run before a value touches anything, for ``set``, forks and
merges alike; each error says which value, what the dtype can hold and what is expected.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from onthefly.errors import ConfigurationError

UNIT_INTERVAL = ("momentum", "betas")
"""Hyperparameters that must lie in [0, 1) and stay below 1 in float32."""
COMPUTE = torch.float32
"""The dtype optimizer kernels compute their scalars in (float64 parameters aside)."""


def floating_dtypes(params: Iterable[torch.Tensor]) -> set[torch.dtype]:
    """The floating-point dtypes among ``params`` (float32 when there is none)."""
    found = {p.dtype for p in params if p.is_floating_point()}
    return found or {torch.float32}


def check_hparam(name: str, value: float | Sequence[float], dtypes: set[torch.dtype]) -> None:
    """Check one hyperparameter's new value for parameters of ``dtypes``.

    ``lr`` and any other positive scale (a temperature) must be finite, above 0, at most the
    largest value of every dtype and at least float32's smallest normal; ``weight_decay``
    the same but may be 0; ``eps`` too, and a non-zero ``eps`` must not round to 0 in the
    parameters' dtype (it is added to a tensor of that dtype, which it would then not
    change: float16 holds nothing below 6e-8); ``momentum`` and each of ``betas`` in [0, 1)
    and below 1 in float32.

    Raises:
        ConfigurationError: says which value, why, and what is expected.

    Example:
        >>> check_hparam("lr", 1e-3, {torch.float16})  # fine: returns None
        >>> check_hparam("eps", 1e-8, {torch.float16})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        onthefly.errors.ConfigurationError: eps=1e-08 rounds to 0 in float16, ...
    """
    values = [float(v) for v in value] if isinstance(value, Sequence) else [float(value)]
    for number in values:
        if not math.isfinite(number):
            raise ConfigurationError(f"{name}={number!r} is not finite; expected a finite number")
        if name in UNIT_INTERVAL:
            _check_unit(name, number)
        else:
            _check_scale(name, number, dtypes)


def check_command_values(
    params: Iterable[torch.Tensor],
    lr: float | None = None,
    temperature: float | None = None,
    weights: Sequence[float] | None = None,
) -> None:
    """The same checks for a fork's or a merge's values, against the model's ``params``.

    Raises:
        ConfigurationError: as :func:`check_hparam` and :func:`check_weights`.
    """
    dtypes = floating_dtypes(params)
    if lr is not None:
        check_hparam("lr", lr, dtypes)
    if temperature is not None:
        check_hparam("temperature", temperature, dtypes)
    if weights is not None:
        check_weights(weights)


def check_weights(weights: Sequence[float]) -> None:
    """Check merge weights: finite, at least 0, with a finite positive sum.

    Raises:
        ConfigurationError: names the first bad weight, or the sum.
    """
    for index, weight in enumerate(weights):
        if not math.isfinite(weight) or weight < 0:
            raise ConfigurationError(
                f"weight {index} is {weight!r}; expected a finite number at least 0"
            )
    try:
        total = math.fsum(weights)
    except OverflowError:
        total = math.inf
    if not 0 < total < float(torch.finfo(torch.float32).max):
        raise ConfigurationError(
            f"the weights sum to {total!r}; expected a positive sum that float32 can hold"
        )


def _check_scale(name: str, number: float, dtypes: set[torch.dtype]) -> None:
    zero_allowed = name in ("weight_decay", "eps")
    if number < 0 or (number == 0 and not zero_allowed):
        least = "at least 0" if zero_allowed else "above 0"
        raise ConfigurationError(f"{name}={number!r}; expected a finite number {least}")
    # float64 parameters compute in float64; everything else in float32 at least.
    wide = dtypes == {torch.float64}
    for dtype in sorted(dtypes if wide else dtypes | {COMPUTE}, key=str):
        info = torch.finfo(dtype)
        if number > info.max:
            raise ConfigurationError(
                f"{name}={number!r} overflows {_name(dtype)} (largest {info.max:.4g}); "
                f"expected a value at most {info.max:.4g}"
            )
    smallest = torch.finfo(torch.float64 if wide else COMPUTE).tiny
    if 0 < number < smallest:
        least = f"{'0 or ' if zero_allowed else ''}at least {smallest:.4g}"
        raise ConfigurationError(
            f"{name}={number!r} is below the smallest normal number of the computation; "
            f"expected {least}"
        )
    for dtype in sorted(dtypes, key=str) if name == "eps" else ():
        if number and float(torch.tensor(number, dtype=dtype)) == 0:
            raise ConfigurationError(
                f"eps={number!r} rounds to 0 in {_name(dtype)}, so it would not keep a zero "
                f"denominator away from 0; expected at least {_smallest(dtype):.3g}"
            )


def _check_unit(name: str, number: float) -> None:
    if not 0 <= number < 1:
        raise ConfigurationError(f"{name} value {number!r}; expected a number in [0, 1)")
    if float(torch.tensor(number, dtype=COMPUTE)) >= 1:
        raise ConfigurationError(
            f"{name} value {number!r} rounds to 1 in float32; expected a value below "
            f"{1 - torch.finfo(COMPUTE).eps / 2:.9g}"
        )


def _smallest(dtype: torch.dtype) -> float:
    """The smallest positive number of ``dtype`` (subnormals included)."""
    info = torch.finfo(dtype)
    return float(info.tiny) * float(info.eps)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
