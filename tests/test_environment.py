"""Settings from the environment: bad values are reported and replaced, or refused for ports."""

from __future__ import annotations

import pytest

from onthefly import environment
from onthefly.errors import ConfigurationError

NAME = "ONTHEFLY_TEST_SETTING"


def test_seconds_come_from_the_environment_and_bad_values_fall_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert environment.positive_seconds(NAME, 30.0) == 30.0
    monkeypatch.setenv(NAME, " 2.5 ")
    assert environment.positive_seconds(NAME, 30.0) == 2.5
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv(NAME, bad)
        assert environment.positive_seconds(NAME, 30.0) == 30.0
    assert f"{NAME}='soon' is ignored: expected a number of seconds > 0" in caplog.text


def test_a_port_is_given_read_or_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert environment.port(None, NAME, 47621) == 47621
    assert environment.port(0, NAME, 47621) == 0
    monkeypatch.setenv(NAME, "8080")
    assert environment.port(None, NAME, 47621) == 8080
    assert environment.port(9000, NAME, 47621) == 9000  # given beats the environment
    monkeypatch.setenv(NAME, "eighty")
    with pytest.raises(ConfigurationError, match=f"{NAME}='eighty' is not a number"):
        environment.port(None, NAME, 47621)
    with pytest.raises(ConfigurationError, match="port 70000 is out of range"):
        environment.port(70000, NAME, 47621)
