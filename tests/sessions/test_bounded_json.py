"""Bounded JSON: the depth is exact, the parsed-size estimate an upper bound of what parsing
(and validating into the protocol's models) really takes, for the worst shapes."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onthefly.protocol import Snapshot
from onthefly.sessions.bounded_json import JsonLimitError, loads, measure

N = 5_000
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=150, deadline=None)
@given(_json_values)
def test_the_depth_is_exact_whatever_the_strings_hold(value: Any) -> None:
    text = json.dumps(value).encode()
    assert measure(text, max_depth=100).depth == depth_of(value)
    assert measure(text.replace(b"\\\\", b"[\\\\"), max_depth=100).depth >= 0  # never raises


def test_brackets_and_quotes_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": '[[[{"x": "]]]\\"[['}).encode()
    assert measure(text, max_depth=10).depth == 1


def _snapshot(**fields: Any) -> dict[str, Any]:
    base = {"type": "snapshot", "v": 1, "session": "s", "seq": 0, "time": 0.0}
    return {**base, "logs": [], "runs": [], **fields}


_RUN = {"run": "r", "project": "p", "name": "n", "state": "finished", "step": 0, "epoch": 0}
_RUN = {**_RUN, "started_at": 0.0}
_FINDING = {"check": "gradients", "severity": "info", "summary": "", "details": {}}
_HEALTH = {"v": 1, "session": "s", "run": "r", "seq": 1, "time": 0, "type": "health_result"}
_HEALTH = {**_HEALTH, "check": "gradients", "step": 0, "duration": 0}

SHAPES: dict[str, Any] = {
    "short floats": [0.5] * N,
    "small ints": [1] * N,
    "large ints": [10**6 + i for i in range(N)],
    "huge ints": [10**80 + i for i in range(N)],
    "empty arrays": [[]] * N,
    "empty objects": [{}] * N,
    "nested arrays": [[1]] * N,
    "distinct keys": {f"k{i}": 0 for i in range(N)},
    "small objects": [{"a": 1}] * N,
    "objects of distinct keys": [{f"a{i}": 1} for i in range(N)],
    "short strings": [f"{i % 26}{i}" for i in range(N)],
    "latin-1 strings": ["\u00e9" + str(i) for i in range(N)],
    "astral strings": ["\U0001f600" + str(i) for i in range(N)],
    "log records": _snapshot(logs=[{"time": 0, "level": "INFO", "logger": "", "message": ""}] * N),
    "runs": _snapshot(runs=[_RUN] * (N // 10)),
    "findings": _snapshot(runs=[{**_RUN, "health": [{**_HEALTH, "findings": [_FINDING] * N}]}]),
    "series": _snapshot(
        runs=[{**_RUN, "series": {"loss": {"steps": list(range(N)), "values": [0.25] * N}}}]
    ),
    "series of integer values": _snapshot(  # each becomes a float as well when validated
        runs=[
            {
                **_RUN,
                "series": {"loss": {"steps": [7] * N, "values": [10**6 + i for i in range(N)]}},
            }
        ]
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_estimate_bounds_what_parsing_and_validating_takes(shape: str) -> None:
    text = json.dumps(SHAPES[shape], ensure_ascii=False).encode()
    estimate = measure(text, max_depth=64).parsed_bytes
    tracemalloc.start()
    try:
        document = json.loads(text)
        if isinstance(document, dict) and document.get("type") == "snapshot":
            Snapshot.model_validate(document)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= estimate, (shape, peak, estimate)
    if shape == "series":  # what histories hold: the estimate does not refuse them early
        assert estimate <= 2 * peak, (peak, estimate)


def test_too_deep_or_too_large_is_refused_before_parsing() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000  # json.loads itself raises RecursionError here
    with pytest.raises(JsonLimitError, match="deeper than 64 levels"):
        loads(deep, max_depth=64, max_memory=1 << 30)
    with pytest.raises(JsonLimitError, match=r"about \d+ MiB once parsed .*expected at most 1 MiB"):
        loads(b"[" + b"[]," * 100_000 + b"[]]", max_depth=64, max_memory=1 << 20)
    assert loads(b'{"a": [1, 2]}', max_depth=2, max_memory=1 << 20) == {"a": [1, 2]}


def test_invalid_json_is_still_a_value_error() -> None:
    with pytest.raises(ValueError):
        loads(b'{"a": [1, 2}', max_depth=64, max_memory=1 << 20)
    with pytest.raises(ValueError):
        loads(b'"unterminated', max_depth=64, max_memory=1 << 20)


def test_an_exports_history_of_its_most_points_fits_the_readers_limits() -> None:
    from onthefly.sessions.archive import Limits
    from onthefly.sessions.payload import HISTORY_POINTS

    # Points as exports write them: 7-digit steps and full-precision float values.
    n = 20_000
    series = {"steps": list(range(1_000_000, 1_000_000 + n)), "values": [i / 7 for i in range(n)]}
    shape = measure(json.dumps(series).encode(), max_depth=64)
    limits = Limits()
    assert HISTORY_POINTS * shape.parsed_bytes / n <= limits.max_json_memory
    assert HISTORY_POINTS * shape.size / n <= limits.max_json_bytes
