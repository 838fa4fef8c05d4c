"""What every rank sends rank 0 at an exchange, and who receives it."""

from __future__ import annotations

from typing import Any

from onthefly.distributed.exchange import Exchange


def test_providers_are_asked_and_consumers_get_every_rank_in_order() -> None:
    exchange = Exchange()
    forced: list[bool] = []

    def cursor(force: bool) -> dict[str, int]:
        forced.append(force)
        return {"step": 3}

    exchange.provide("cursor", cursor)
    exchange.provide("samples", lambda force: None)  # nothing to send: left out
    assert exchange.collect(force=True) == {"cursor": {"step": 3}}
    assert forced == [True]

    got: list[tuple[int, Any]] = []
    exchange.consume("cursor", lambda rank, value: got.append((rank, value)))
    exchange.deliver([{"cursor": "r0"}, {}, {"cursor": "r2", "unknown": 1}])
    assert got == [(0, "r0"), (2, "r2")]
