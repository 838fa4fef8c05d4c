"""The per-sample commands' rule that the JSON Schema cannot express: exactly one criterion."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from onthefly.protocol import CLIENT_COMMAND, CONTROL_COMMANDS, SAMPLE_COMMANDS


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"top": 5, "quantile": 0.5},
        {"region": "easy", "clusters": 3},
        {"loss_min": 1, "top": 2},
        {"region": "hard", "confidence_max": 0.3},
    ],
)
def test_a_selection_takes_exactly_one_criterion(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="exactly one criterion"):
        CLIENT_COMMAND.validate_python({"type": "select", "id": "1", **fields})


def test_a_loss_range_may_have_one_open_bound() -> None:
    command = CLIENT_COMMAND.validate_python({"type": "select", "id": "1", "loss_max": 2.0})
    assert command.type == "select"


def test_a_box_is_one_criterion_whatever_bounds_it_has() -> None:
    command = CLIENT_COMMAND.validate_python(
        {"type": "select", "id": "1", "confidence_min": 0.1, "variability_max": 0.2}
    )
    assert command.criteria_given() == 1 and command.box_given()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"region": "mislabeled", "size": 5, "fraction": 0.1}, "a fraction or a size"),
        ({"top": 5, "size": 3}, "apply to a region"),
        ({"region": "hard", "with_correctness": True}, "'mislabeled' region only"),
    ],
)
def test_region_options_go_with_a_region(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        CLIENT_COMMAND.validate_python({"type": "select", "id": "1", **fields})


def test_per_sample_commands_run_on_the_training_thread() -> None:
    assert SAMPLE_COMMANDS <= CONTROL_COMMANDS
