"""The fork and merge commands' rules that the JSON Schema cannot express."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from onthefly.protocol import CLIENT_COMMAND, CONTROL_COMMANDS, FORK_COMMANDS


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"steps": 5}, "exactly one slice"),
        ({"selection": "tail", "top": 5, "steps": 5}, "exactly one slice"),
        ({"indices": [1], "quantile": 0.5, "steps": 5}, "exactly one slice"),
        ({"top": 5, "region": "hard", "steps": 5}, "exactly one slice"),
        ({"selection": "tail"}, "exactly one budget"),
        ({"selection": "tail", "steps": 5, "epochs": 1}, "exactly one budget"),
        (
            {"top": 5, "steps": 5, "optimizer": "clone", "adapter_rank": 4},
            "cannot go with adapter_rank",
        ),
        ({"region": "hard", "size": 3, "fraction": 0.2, "steps": 5}, "a fraction or a size"),
    ],
)
def test_a_fork_takes_one_slice_and_one_budget(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        CLIENT_COMMAND.validate_python({"type": "fork", "id": "1", **fields})


def test_a_loss_range_is_one_criterion() -> None:
    command: Any = CLIENT_COMMAND.validate_python(
        {"type": "fork", "id": "1", "loss_min": 1.0, "loss_max": 2.0, "epochs": 1}
    )
    assert command.criteria_given() == 1


@pytest.mark.parametrize("method", ["greedy", "fisher", "distill"])
def test_merge_weights_only_for_soups_and_adapters(method: str) -> None:
    with pytest.raises(ValidationError, match="weights apply to soup and adapter"):
        CLIENT_COMMAND.validate_python(
            {"type": "merge", "id": "1", "method": method, "forks": ["a"], "weights": [1, 1]}
        )


def test_fork_commands_run_on_the_training_thread() -> None:
    assert FORK_COMMANDS <= CONTROL_COMMANDS


@pytest.mark.parametrize(
    ("method", "fields"),
    [("soup", {"temperature": 2.0}), ("adapter", {"strength": 0.5}), ("fisher", {"weights": [1]})],
)
def test_merge_options_apply_to_their_methods(method: str, fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="apply to"):
        CLIENT_COMMAND.validate_python(
            {"type": "merge", "id": "1", "method": method, "forks": ["a"], **fields}
        )
