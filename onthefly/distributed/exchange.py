"""The data exchange: what every rank sends rank 0 at a control round.

Parts register *providers* (on every rank: ``fn(force) -> value``, the value picklable,
``None`` to send nothing) and *consumers* (used on rank 0: ``fn(rank, value)``) under a
key. At an exchange every rank calls its providers, one gather brings all the values to
rank 0, and the consumers get them rank by rank. ``force`` asks providers to include what
they still hold (e.g. per-sample values not yet copied from the device): it is set when
the run is about to pause, answer a command or end.

Built in: the ``cursor`` of each rank (see :mod:`onthefly.distributed.cursor`). The
per-sample tracker sends its per-sample losses and dataset indices under ``samples``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onthefly.distributed.group import ControlGroup

Provider = Callable[[bool], Any]
Consumer = Callable[[int, Any], None]


class Exchange:
    """Providers and consumers by key, and the gather that connects them.

    Example:
        >>> exchange = Exchange()
        >>> exchange.provide("answer", lambda force: 42)
        >>> exchange.consume("answer", lambda rank, value: print(rank, value))
        >>> exchange.deliver([{"answer": 42}, {"answer": 43}])
        0 42
        1 43
    """

    def __init__(self) -> None:
        self._providers: dict[str, Provider] = {}
        self._consumers: dict[str, list[Consumer]] = {}

    def provide(self, key: str, provider: Provider) -> None:
        """Send ``provider(force)`` under ``key`` at each exchange (replaces an earlier one)."""
        self._providers[key] = provider

    def consume(self, key: str, consumer: Consumer) -> None:
        """On rank 0, hand every rank's value under ``key`` to ``consumer(rank, value)``."""
        self._consumers.setdefault(key, []).append(consumer)

    def collect(self, force: bool) -> dict[str, Any]:
        """This rank's values."""
        values = {key: provider(force) for key, provider in self._providers.items()}
        return {key: value for key, value in values.items() if value is not None}

    def deliver(self, gathered: list[dict[str, Any]]) -> None:
        """Hand gathered values (indexed by rank) to the consumers."""
        for rank, values in enumerate(gathered):
            for key, value in values.items():
                for consumer in self._consumers.get(key, ()):
                    consumer(rank, value)

    def run(self, group: ControlGroup, force: bool) -> None:
        """One exchange (a collective: every rank calls it at the same round)."""
        gathered = group.gather(self.collect(force), "exchange of per-rank data")
        if gathered is not None:
            self.deliver(gathered)
