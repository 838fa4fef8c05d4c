"""The per-sample commands' rule that the JSON Schema cannot express: exactly one criterion."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from onthefly.protocol import CLIENT_COMMAND, CONTROL_COMMANDS, SAMPLE_COMMANDS


@pytest.mark.parametrize(
    "fields",
    [{}, {"top": 5, "quantile": 0.5}, {"region": "easy", "clusters": 3}, {"loss_min": 1, "top": 2}],
)
def test_a_selection_takes_exactly_one_criterion(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="exactly one criterion"):
        CLIENT_COMMAND.validate_python({"type": "select", "id": "1", **fields})


def test_a_loss_range_may_have_one_open_bound() -> None:
    command = CLIENT_COMMAND.validate_python({"type": "select", "id": "1", "loss_max": 2.0})
    assert command.type == "select"


def test_per_sample_commands_run_on_the_training_thread() -> None:
    assert SAMPLE_COMMANDS <= CONTROL_COMMANDS
