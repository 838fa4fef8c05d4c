"""Values a command would put into training, checked against the parameters' dtypes."""

from __future__ import annotations

import pytest
import torch

from onthefly._representable import (
    check_command_values,
    check_hparam,
    check_weights,
    floating_dtypes,
)
from onthefly.errors import ConfigurationError

F32, F16, BF16, F64 = {torch.float32}, {torch.float16}, {torch.bfloat16}, {torch.float64}


@pytest.mark.parametrize(
    ("name", "value", "dtypes", "expected"),
    [
        ("lr", 1e300, F32, r"lr=1e\+300 overflows float32 \(largest 3.403e\+38\)"),
        ("lr", 1e5, F16, r"overflows float16 \(largest 6.55e\+04\)"),
        ("lr", 1e39, BF16 | F32, "overflows bfloat16"),
        ("weight_decay", 1e308, F32, "overflows float32"),
        ("lr", 0.0, F32, "expected a finite number above 0"),
        ("lr", -1e-3, F32, "above 0"),
        ("weight_decay", -1.0, F32, "at least 0"),
        ("lr", float("nan"), F32, "is not finite"),
        ("lr", float("inf"), F64, "is not finite"),
        ("lr", 1e-40, F32, "below the smallest normal number"),
        ("eps", 1e-8, F16, "eps=1e-08 rounds to 0 in float16"),
        ("momentum", 1.0, F32, r"expected a number in \[0, 1\)"),
        ("betas", [0.9, 1 - 1e-9], F32, "rounds to 1 in float32"),
        ("betas", [0.9, -0.1], F32, r"in \[0, 1\)"),
        ("temperature", 0.0, F32, "above 0"),
    ],
)
def test_values_the_parameters_cannot_take_are_refused(
    name: str, value: object, dtypes: set[torch.dtype], expected: str
) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        check_hparam(name, value, dtypes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "dtypes"),
    [
        ("lr", 1e-3, F16),
        ("lr", 1e300, F64),  # float64 parameters compute in float64
        ("weight_decay", 0.0, F32),
        ("eps", 0.0, F16),
        ("eps", 1e-7, F16),
        ("eps", 1e-8, BF16),  # bfloat16 has float32's range
        ("momentum", 0.0, F32),
        ("betas", [0.9, 0.999], BF16),  # scalars are computed in float32
    ],
)
def test_values_they_can_take_pass(name: str, value: object, dtypes: set[torch.dtype]) -> None:
    check_hparam(name, value, dtypes)  # type: ignore[arg-type]


def test_the_dtypes_are_the_floating_ones_of_the_parameters() -> None:
    params = [torch.zeros(2, dtype=torch.float16), torch.zeros(2, dtype=torch.long)]
    assert floating_dtypes(params) == F16
    assert floating_dtypes([torch.zeros(1, dtype=torch.long)]) == F32


def test_merge_weights_need_a_finite_positive_sum() -> None:
    check_weights([0.0, 1.0, 2.5])
    with pytest.raises(ConfigurationError, match="weights sum to"):
        check_weights([1e308, 1e308])
    with pytest.raises(ConfigurationError, match=r"weights sum to 0\.0"):
        check_weights([0.0, 0.0])
    with pytest.raises(ConfigurationError, match="weight 1 is"):
        check_weights([1.0, float("nan")])


def test_fork_and_merge_values_go_through_the_same_checks() -> None:
    params = list(torch.nn.Linear(2, 2).half().parameters())
    check_command_values(params, lr=1e-3, temperature=2.0, weights=[1.0, 1.0])
    with pytest.raises(ConfigurationError, match="overflows float16"):
        check_command_values(params, lr=1e6)
    with pytest.raises(ConfigurationError, match="temperature=1e-300"):
        check_command_values(params, temperature=1e-300)
