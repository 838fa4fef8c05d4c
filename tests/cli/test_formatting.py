"""The CLI's text for alerts and events: in ``status`` and in ``watch``'s stream lines."""

from __future__ import annotations

from onthefly.cli import formatting as _format
from onthefly.protocol import SERVER_MESSAGE
from tests.golden import EXAMPLES


def test_status_lists_the_alerts_raised() -> None:
    data = {"run": "demo/cnn", "state": "running", "step": 9, "epoch": 0, "latest": {}}
    assert "alerts" not in _format.status(data)
    text = _format.status({**data, "alerts": ["nonfinite_loss", "stalled"]})
    assert text.splitlines()[-1] == "  alerts: nonfinite_loss, stalled"


def test_alert_config_and_steps_events_have_stream_lines() -> None:
    for name in ("alert.json", "config.json", "steps.json"):
        message = SERVER_MESSAGE.validate_json((EXAMPLES / "valid" / "server" / name).read_bytes())
        line = _format.stream_line(message)
        assert line.startswith(message.type)
    alert = SERVER_MESSAGE.validate_json((EXAMPLES / "valid/server/alert.json").read_bytes())
    assert "error nonfinite_loss raised at step 412" in _format.stream_line(alert)


def test_a_steps_event_line_names_its_steps_and_last_values() -> None:
    steps = SERVER_MESSAGE.validate_json((EXAMPLES / "valid/server/steps.json").read_bytes())
    line = _format.stream_line(steps)
    assert "train steps 119-121" in line and "loss=0.4087" in line and "grad_norm=1.93" in line
